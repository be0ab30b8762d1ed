/**
 * The chat commands (docs/architecture.md, "Chat commands").
 *
 * GENERATED from prime_agent_lab/core/commands.py; do not edit. Regenerate with
 *   python -m prime_agent_lab.core.commands --ts > labextension/src/commands.ts
 */

import type { IModelList, IRefinementList, ISessionCopy, ISessionTree } from './wire';

export type ArgumentKind = 'flag' | 'option' | 'word' | 'text';

export type CommandView = 'help' | 'tree' | 'copy' | 'note' | 'refinements' | 'usage' | 'context' | 'models';

export interface IArgumentSpec {
  name: string;
  kind: ArgumentKind;
  help: string;
  value?: string;
}

export interface IFormSpec {
  keyword: string | null;
  usage: string;
  help: string;
  view: CommandView;
  arguments: IArgumentSpec[];
}

/** A chat command as the panel and `/help` read it. */
export interface ICommandSpec {
  name: string;
  help: string;
  forms: IFormSpec[];
}

/** Answer of `/help`. */
export interface ICommandList {
  commands: ICommandSpec[];
}

/** An answer the chat shows as one line. */
export interface ICommandNote {
  text: string;
}

/** One agent of the tree in `rlm.usage()` and `/usage`: its own model calls and, in the `_total` fields, those of its sub-agents too. */
export interface IAgentUsage {
  session_id: string;
  name: string;
  notebook_path: string | null;
  model: string;
  status: string;
  calls: number;
  usage: Record<string, number>;
  usage_total: Record<string, number>;
  cost: number | null;
  cost_total: number | null;
  children: IAgentUsage[];
}

/** A server of a project `.mcp.json` as it would run: what Trust agrees to start. */
export interface IMcpServerView {
  name: string;
  transport: string;
  command: string;
  args: string[];
  cwd: string;
  url: string;
  env: string[];
  headers: string[];
}

/** A project file's row in `/context`: what its Trust button sends (`path`, `sha256`) and what it trusts (`content`, or `servers` and `problems`). */
export interface IProjectFileInfo {
  path: string;
  kind: string;
  sha256: string;
  size: number;
  link_to: string;
  content: string;
  cut: boolean;
  servers: IMcpServerView[];
  problems: string[];
}

/** One part of the system prompt (or a project file that is not in it, and why). */
export interface IPromptPart {
  part: string;
  source: string;
  chars: number;
  tokens: number;
  status: string;
  note: string;
  file: IProjectFileInfo | null;
}

/** Answer of `/context` and `GET .../context`. */
export interface IContextReport {
  session_id: string;
  notebook_path: string;
  project_context: boolean;
  parts: IPromptPart[];
  chars: number;
  tokens: number;
}

/** The answer each view shows. */
export interface ICommandAnswers {
  help: ICommandList;
  tree: ISessionTree;
  copy: ISessionCopy;
  note: ICommandNote;
  refinements: IRefinementList;
  usage: IAgentUsage;
  context: IContextReport;
  models: IModelList;
}

/** Answer of `POST .../commands/<name>`: the view and its answer. */
export type CommandReply = {
  [V in CommandView]: {
    command: string;
    form: string | null;
    view: V;
    answer: ICommandAnswers[V];
  };
}[CommandView];

/** Every chat command, in the order `/help` lists them. */
export const CHAT_COMMANDS: readonly ICommandSpec[] = [
  {
    "name": "help",
    "help": "List the chat commands.",
    "forms": [
      {
        "keyword": null,
        "usage": "/help",
        "help": "Each command and its forms.",
        "view": "help",
        "arguments": []
      }
    ]
  },
  {
    "name": "tree",
    "help": "The session's tree: branch to a message or a turn's end, fork, clone.",
    "forms": [
      {
        "keyword": null,
        "usage": "/tree",
        "help": "Show the tree of user messages and turn ends.",
        "view": "tree",
        "arguments": []
      }
    ]
  },
  {
    "name": "fork",
    "help": "A new session and notebook from before the newest message of this branch.",
    "forms": [
      {
        "keyword": null,
        "usage": "/fork",
        "help": "Fork; the message waits in the new session's input.",
        "view": "copy",
        "arguments": []
      }
    ]
  },
  {
    "name": "clone",
    "help": "A new session and notebook with the whole current branch.",
    "forms": [
      {
        "keyword": null,
        "usage": "/clone",
        "help": "Clone the current branch.",
        "view": "copy",
        "arguments": []
      }
    ]
  },
  {
    "name": "refine",
    "help": "Refine the agent's harness (notes, memories, skills), roll a refinement back, or list.",
    "forms": [
      {
        "keyword": null,
        "usage": "/refine [--global] [instructions]",
        "help": "Plan a refinement in the background; it applies at the next turn boundary.",
        "view": "note",
        "arguments": [
          {
            "name": "global",
            "kind": "flag",
            "help": "the shared global harness store, not this session's"
          },
          {
            "name": "instructions",
            "kind": "text",
            "help": "what to refine, if given"
          }
        ]
      },
      {
        "keyword": "rollback",
        "usage": "/refine rollback <id> [--global]",
        "help": "Roll a refinement back (recorded as a new refinement).",
        "view": "note",
        "arguments": [
          {
            "name": "id",
            "kind": "word",
            "help": "the refinement's id"
          },
          {
            "name": "global",
            "kind": "flag",
            "help": "accepted for symmetry: the id finds its store"
          }
        ]
      },
      {
        "keyword": "history",
        "usage": "/refine history",
        "help": "The recent refinements, each with a Rollback button.",
        "view": "refinements",
        "arguments": []
      }
    ]
  },
  {
    "name": "goal",
    "help": "Keep the agent on an objective until it calls goal.complete() (docs/autonomy.md).",
    "forms": [
      {
        "keyword": null,
        "usage": "/goal [--budget N] [objective]",
        "help": "Set the goal (an idle agent starts on it); alone, the goal's status.",
        "view": "note",
        "arguments": [
          {
            "name": "budget",
            "kind": "option",
            "help": "input + output tokens it may use, sub-agents' included",
            "value": "N"
          },
          {
            "name": "objective",
            "kind": "text",
            "help": "what to achieve"
          }
        ]
      },
      {
        "keyword": "status",
        "usage": "/goal status",
        "help": "The goal, its budget used and left.",
        "view": "note",
        "arguments": []
      },
      {
        "keyword": "pause",
        "usage": "/goal pause",
        "help": "Stop continuing the goal.",
        "view": "note",
        "arguments": []
      },
      {
        "keyword": "resume",
        "usage": "/goal resume",
        "help": "Continue a paused goal (an idle agent goes on).",
        "view": "note",
        "arguments": []
      },
      {
        "keyword": "clear",
        "usage": "/goal clear",
        "help": "Drop the goal.",
        "view": "note",
        "arguments": []
      }
    ]
  },
  {
    "name": "usage",
    "help": "Tokens and cost of this agent and each of its sub-agents, own and in total.",
    "forms": [
      {
        "keyword": null,
        "usage": "/usage",
        "help": "Usage per agent of the tree below this one.",
        "view": "usage",
        "arguments": []
      }
    ]
  },
  {
    "name": "heartbeat",
    "help": "Bring this agent back on a schedule with an instruction; the agent cannot change it.",
    "forms": [
      {
        "keyword": null,
        "usage": "/heartbeat [--steer] [--follow-up] [schedule]",
        "help": "Set this session's heartbeat (replacing the one before): `every <dur> [--steer|--follow-up] <instruction>`; steer enters a running turn, follow-up waits for it to end.",
        "view": "note",
        "arguments": [
          {
            "name": "steer",
            "kind": "flag",
            "help": "enter a running turn at its next model call (default)"
          },
          {
            "name": "follow-up",
            "kind": "flag",
            "help": "wait until a running turn ends"
          },
          {
            "name": "schedule",
            "kind": "text",
            "help": "every <dur> [--steer|--follow-up] <instruction>"
          }
        ]
      },
      {
        "keyword": "pause",
        "usage": "/heartbeat pause",
        "help": "Pause the heartbeat.",
        "view": "note",
        "arguments": []
      },
      {
        "keyword": "resume",
        "usage": "/heartbeat resume",
        "help": "Resume the paused heartbeat.",
        "view": "note",
        "arguments": []
      },
      {
        "keyword": "stop",
        "usage": "/heartbeat stop",
        "help": "Stop and remove the heartbeat.",
        "view": "note",
        "arguments": []
      },
      {
        "keyword": "status",
        "usage": "/heartbeat status",
        "help": "The heartbeat and its next run.",
        "view": "note",
        "arguments": []
      }
    ]
  },
  {
    "name": "model",
    "help": "The model this session runs on and the ones it may switch to (rlm.find_models()).",
    "forms": [
      {
        "keyword": null,
        "usage": "/model [name]",
        "help": "Alone, the model and the choices; with a name, switch from the next model call.",
        "view": "models",
        "arguments": [
          {
            "name": "name",
            "kind": "text",
            "help": "`provider/model` or a model name"
          }
        ]
      }
    ]
  },
  {
    "name": "context",
    "help": "What the system prompt holds, part by part, with sources and sizes; trust project files.",
    "forms": [
      {
        "keyword": null,
        "usage": "/context",
        "help": "The prompt's parts in order (base, sub-agents, harness, project files, ...), each with its source, characters and estimated tokens; a Trust button for each untrusted project file.",
        "view": "context",
        "arguments": []
      }
    ]
  }
];
