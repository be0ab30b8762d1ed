/**
 * Chat commands in the composer: which text is a command, and what to
 * complete. Everything comes from the generated declaration (commands.ts);
 * the server parses the arguments (core/commands.py), so there is one parser.
 */
import { CHAT_COMMANDS, type ICommandSpec, type IFormSpec } from './commands';

/** A line of the composer that is a declared command. */
export interface ICommandLine {
  name: string;
  /** The text after the name, for the server to parse. */
  args: string;
}

/** The command typed into the input, or null for an ordinary message. */
export function commandLine(
  text: string,
  commands: readonly ICommandSpec[] = CHAT_COMMANDS
): ICommandLine | null {
  const match = /^\/([a-z][a-z0-9-]*)(?:\s+([\s\S]*))?$/.exec(text.trim());
  if (!match || !commands.some(command => command.name === match[1])) {
    return null;
  }
  return { name: match[1], args: (match[2] ?? '').trim() };
}

/** One completion of the composer's text. */
export interface ICompletion {
  /** What the menu shows: `/refine`, `history`, `--global`. */
  label: string;
  /** The help shown next to it. */
  detail: string;
  /** The composer's whole text once this completion is taken. */
  text: string;
}

/**
 * What the text being typed can become: a command's name while the first
 * word is typed, then the keywords and flags of its forms (a keyword only
 * before any other word). Nothing for ordinary messages.
 */
export function completions(
  text: string,
  commands: readonly ICommandSpec[] = CHAT_COMMANDS
): ICompletion[] {
  const name = /^\/([a-z0-9-]*)$/.exec(text);
  if (name) {
    return commands
      .filter(command => command.name.startsWith(name[1]))
      .map(command => ({
        label: `/${command.name}`,
        detail: command.help,
        text: `/${command.name}${takesArguments(command) ? ' ' : ''}`
      }))
      .filter(completion => completion.text !== text);
  }
  const line = /^\/([a-z][a-z0-9-]*)\s+((?:\S+\s+)*)(\S*)$/.exec(text);
  const command = line ? commands.find(c => c.name === line[1]) : undefined;
  if (!line || !command) {
    return [];
  }
  const words = line[2].split(/\s+/).filter(word => word !== '');
  const valued = new Set(
    command.forms.flatMap(f =>
      f.arguments.filter(a => a.kind === 'option').map(a => `--${a.name}`)
    )
  );
  if (words.length > 0 && valued.has(words[words.length - 1])) {
    return []; // an option's value is being typed
  }
  // The words typed, an option's value left out (`--budget 5000`).
  const before = words.filter((_, i) => i === 0 || !valued.has(words[i - 1]));
  const typing = line[3];
  const leading = before.every(word => word.startsWith('--'));
  const keyword = before.find(word => !word.startsWith('--'));
  const form = leading ? null : command.forms.find(f => f.keyword === keyword);
  const candidates: ICompletion[] = [];
  const prefix = text.slice(0, text.length - typing.length);
  if (leading) {
    for (const keyed of command.forms.filter(f => f.keyword !== null)) {
      const label = keyed.keyword!;
      candidates.push({ label, detail: keyed.help, text: `${prefix}${label} ` });
    }
  }
  const forms = leading ? command.forms : form ? [form] : [];
  const seen = new Set<string>();
  for (const each of forms) {
    for (const flag of flags(each)) {
      const label = `--${flag.name}`;
      if (!seen.has(label) && !before.includes(label)) {
        seen.add(label);
        candidates.push({ label, detail: flag.help, text: `${prefix}${label} ` });
      }
    }
  }
  return candidates.filter(
    candidate => candidate.label.startsWith(typing) && candidate.label !== typing
  );
}

function takesArguments(command: ICommandSpec): boolean {
  return command.forms.some(form => form.keyword !== null || form.arguments.length > 0);
}

function flags(form: IFormSpec) {
  return form.arguments.filter(
    argument => argument.kind === 'flag' || argument.kind === 'option'
  );
}

/** The composer's placeholder, naming a few commands and /help. */
export function composerHint(commands: readonly ICommandSpec[] = CHAT_COMMANDS): string {
  const named = commands
    .filter(command => command.name !== 'help')
    .map(command => `/${command.name}`)
    .join(', ');
  return `Ask the agent… (Enter sends, Shift+Enter for a new line; ${named}; /help lists them)`;
}
