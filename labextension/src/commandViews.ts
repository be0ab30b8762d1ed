/**
 * How the chat panel shows a chat command's answer: one renderer per view
 * the declaration names (core/commands.py, `VIEWS`). The map's type makes a
 * view without a renderer a compile error.
 */
import type {
  CommandReply,
  CommandView,
  IAgentUsage,
  ICommandAnswers,
  ICommandList,
  IContextReport,
  IMcpServerView,
  IProjectFileInfo,
  IPromptPart
} from './commands';
import { button, element } from './dom';
import { renderRefineForm, type IRefineFormActions } from './refine';
import { renderTreeView, type ITreeActions } from './treeView';
import type { IModelList, ISessionCopy } from './wire';
import { formatTokens } from './modelCost';

/** What a view may do in the panel. */
export interface ICommandViewContext {
  /** Shows a view above the composer, in place of the one shown before. */
  show: (node: HTMLElement) => void;
  /** Closes the view above the composer. */
  close: () => void;
  /** A line in the transcript. */
  note: (text: string) => void;
  /** Opens a fork's or clone's notebook (a fork's message waits in the input). */
  openCopy: (copy: ISessionCopy) => Promise<void>;
  /** Opens a notebook (path relative to the server root). */
  openNotebook: (path: string) => void;
  /** Puts text into the composer. */
  setInput: (text: string) => void;
  tree: ITreeActions;
  refinements: IRefineFormActions;
  /**
   * `/context`'s Trust button: trusts exactly the bytes that were shown
   * (`POST /prime-agent/api/context/trust`); the line to show. Absent: no
   * Trust buttons.
   */
  trustProjectFile?: (path: string, sha256: string) => Promise<string>;
}

type Renderer<V extends CommandView> = (
  answer: ICommandAnswers[V],
  context: ICommandViewContext
) => void | Promise<void>;

export const COMMAND_VIEWS: { [V in CommandView]: Renderer<V> } = {
  help: (answer, context) => context.show(renderHelp(answer, context)),
  tree: (answer, context) => context.show(renderTreeView(answer, context.tree)),
  copy: (answer, context) => context.openCopy(answer),
  note: (answer, context) => context.note(answer.text),
  refinements: (answer, context) =>
    context.show(renderRefineForm(answer.refinements, context.refinements)),
  usage: (answer, context) => context.show(renderUsage(answer, context)),
  context: (answer, context) => context.show(renderContext(answer, context)),
  models: (answer, context) => context.show(renderModels(answer, context))
};

/** Show a command's answer the way its view does. */
export function showReply(reply: CommandReply, context: ICommandViewContext): void | Promise<void> {
  const render = COMMAND_VIEWS[reply.view] as Renderer<CommandView>;
  return render(reply.answer, context);
}

/** A view's frame: a title, a Close button, then the content. */
function frame(title: string, testId: string, context: ICommandViewContext): HTMLElement {
  const view = element('div', 'pal-tree pal-command-view', testId);
  const header = element('div', 'pal-tree-header');
  const close = button('Close', 'pal-command-close');
  close.addEventListener('click', context.close);
  header.append(element('span', 'pal-tree-title', undefined, title), close);
  view.append(header);
  return view;
}

/** `/help`: each command's forms with their help; a click puts the form into the input. */
export function renderHelp(answer: ICommandList, context: ICommandViewContext): HTMLElement {
  const view = frame('Chat commands', 'pal-help', context);
  const list = element('dl', 'pal-help-list');
  for (const command of answer.commands) {
    const term = element('dt', 'pal-help-command', 'pal-help-command');
    term.dataset.command = command.name;
    term.append(element('strong', '', undefined, `/${command.name}`), ` ${command.help}`);
    list.append(term);
    for (const form of command.forms) {
      const item = element('dd', 'pal-help-form');
      const usage = element('button', 'pal-help-usage', 'pal-help-usage', form.usage);
      usage.type = 'button';
      usage.title = 'Put it into the input';
      const head = form.keyword ? `/${command.name} ${form.keyword}` : `/${command.name}`;
      const more = form.arguments.length > 0;
      usage.addEventListener('click', () => context.setInput(more ? `${head} ` : head));
      item.append(usage, ` ${form.help}`);
      list.append(item);
    }
  }
  view.append(list);
  return view;
}

const READ_KEYS = ['input_tokens', 'cache_read_tokens', 'cache_write_tokens'];

/** Tokens the model read (input, cache read and write) and wrote. */
function tokens(usage: Record<string, number>): [number, number] {
  const read = READ_KEYS.reduce((sum, key) => sum + (usage[key] ?? 0), 0);
  return [read, usage.output_tokens ?? 0];
}

function count(value: number): string {
  return value.toLocaleString('en-US');
}

/** 950, 12.3k, 4.1M. */
function compact(value: number): string {
  if (value < 1000) {
    return String(value);
  }
  return value < 1_000_000 ? `${(value / 1000).toFixed(1)}k` : `${(value / 1_000_000).toFixed(1)}M`;
}

/** "read / written" tokens, exact figures in the title. */
function tokenCell(usage: Record<string, number>): HTMLElement {
  const [read, wrote] = tokens(usage);
  const cell = element('td', 'pal-usage-tokens', undefined, `${compact(read)} / ${compact(wrote)}`);
  cell.title = breakdown(usage) || 'no model calls';
  return cell;
}

/** US dollars, or a dash with the reason when a model's price is not known. */
export function dollars(cost: number | null): string {
  if (cost === null) {
    return '—';
  }
  return cost > 0 && cost < 0.01 ? `$${cost.toFixed(4)}` : `$${cost.toFixed(2)}`;
}

function breakdown(usage: Record<string, number>): string {
  return Object.entries(usage)
    .map(([key, value]) => `${key.replace(/_/g, ' ')}: ${count(value)}`)
    .join('\n');
}

/** `/usage`: one row per agent of the tree, own and total tokens and cost. */
export function renderUsage(answer: IAgentUsage, context: ICommandViewContext): HTMLElement {
  const view = frame('Usage', 'pal-usage', context);
  const table = element('table', 'pal-command-table');
  const head = element('tr', '');
  const titles: [string, string][] = [
    ['Agent', ''],
    ['Status', ''],
    ['Calls', 'its own model calls'],
    ['Tokens', 'its own calls: read / written'],
    ['Total', 'with its sub-agents: read / written'],
    ['Cost', 'its own calls, US dollars at list price'],
    ['Total cost', 'with its sub-agents']
  ];
  for (const [title, tip] of titles) {
    const th = element('th', '', undefined, title);
    th.title = tip;
    head.append(th);
  }
  table.append(head);
  const rows: [IAgentUsage, number][] = [[answer, 0]];
  while (rows.length > 0) {
    const [agent, depth] = rows.shift()!;
    table.append(usageRow(agent, depth, agent === answer, context));
    rows.unshift(...agent.children.map((child): [IAgentUsage, number] => [child, depth + 1]));
  }
  view.append(table);
  const [read, wrote] = tokens(answer.usage_total);
  const total = element(
    'div',
    'pal-usage-total',
    'pal-usage-total',
    `Total over ${countAgents(answer)} agent(s): ${count(read)} tokens read, ` +
      `${count(wrote)} written, ${dollars(answer.cost_total)}`
  );
  if (answer.cost_total === null) {
    total.title = 'A model without a known price answered a call: the cost is not known.';
  }
  view.append(total);
  return view;
}

function countAgents(agent: IAgentUsage): number {
  return 1 + agent.children.reduce((sum, child) => sum + countAgents(child), 0);
}

function usageRow(
  agent: IAgentUsage,
  depth: number,
  self: boolean,
  context: ICommandViewContext
): HTMLElement {
  const row = element('tr', 'pal-usage-row', 'pal-usage-row');
  row.dataset.sessionId = agent.session_id;
  const who = element('td', 'pal-usage-agent');
  who.style.paddingLeft = `${depth * 12 + 4}px`;
  const label = agent.name || (self ? 'this agent' : agent.session_id);
  const path = agent.notebook_path;
  if (path && !self) {
    const link = element('button', 'pal-link', 'pal-usage-open', label);
    link.type = 'button';
    link.title = `Open ${path}`;
    link.addEventListener('click', () => context.openNotebook(path));
    who.append(link);
  } else {
    who.textContent = label;
  }
  who.title = agent.model;
  const unknown = 'A model without a known price answered a call: the cost is not known.';
  const cost = element('td', 'pal-usage-cost', 'pal-usage-cost', dollars(agent.cost));
  const total = element('td', 'pal-usage-cost', 'pal-usage-cost-total', dollars(agent.cost_total));
  cost.title = agent.cost === null ? unknown : '';
  total.title = agent.cost_total === null ? unknown : '';
  row.append(
    who,
    element('td', 'pal-usage-status', undefined, agent.status),
    element('td', '', undefined, count(agent.calls)),
    tokenCell(agent.usage),
    tokenCell(agent.usage_total),
    cost,
    total
  );
  return row;
}

const STATUS_TIPS: Record<string, string> = {
  used: 'in the system prompt',
  cut: 'in the system prompt, cut to the cap (the prompt says where)',
  untrusted: 'not in the prompt until you trust it',
  unreadable: 'not read: see why'
};

/**
 * `/context`: the system prompt's parts in order, each a block (part, status,
 * size; its source; then what it holds) so it fits a narrow panel. A project
 * file shows all that its Trust button trusts: a context file's whole text as
 * it enters the prompt (the cut said), a `.mcp.json`'s servers as they would
 * run (env and header names only) and its problems.
 */
export function renderContext(answer: IContextReport, context: ICommandViewContext): HTMLElement {
  const view = frame('Context', 'pal-context', context);
  const list = element('div', 'pal-context-list', 'pal-context-list');
  for (const part of answer.parts) {
    list.append(contextRow(part, context));
  }
  view.append(list);
  const off = answer.project_context ? '' : ' Project context files are off (project_context).';
  view.append(
    element(
      'div',
      'pal-usage-total',
      'pal-context-total',
      `System prompt: ${count(answer.chars)} characters, ` +
        `about ${count(answer.tokens)} tokens.${off}`
    )
  );
  return view;
}

function contextRow(part: IPromptPart, context: ICommandViewContext): HTMLElement {
  const row = element('div', 'pal-context-row', 'pal-context-row');
  row.dataset.part = part.part;
  row.dataset.status = part.status;
  const head = element('div', 'pal-context-head');
  const status = element('span', 'pal-context-status', 'pal-context-status', part.status);
  status.title = STATUS_TIPS[part.status] ?? '';
  head.append(
    element('span', 'pal-context-part', 'pal-context-part', part.part),
    status,
    element(
      'span',
      'pal-context-size',
      'pal-context-size',
      `${count(part.chars)} chars · ${count(part.tokens)} tokens`
    )
  );
  const source = element('div', 'pal-context-source', 'pal-context-source', part.source);
  source.title = part.source;
  row.append(head, source);
  if (part.note) {
    row.append(element('div', 'pal-context-note', 'pal-context-note', part.note));
  }
  const file = part.file;
  if (file) {
    if (file.link_to) {
      row.append(
        element('div', 'pal-context-note', 'pal-context-link', `a link to ${file.link_to}`)
      );
    }
    if (file.kind === 'mcp') {
      row.append(...mcpContent(file));
    } else if (file.content) {
      row.append(element('pre', 'pal-context-content', 'pal-context-content', file.content));
    }
    if (part.status === 'untrusted' && context.trustProjectFile) {
      row.append(projectTrustButton(file.path, file.sha256, context.trustProjectFile));
    }
  }
  return row;
}

/** A `.mcp.json`'s servers as they would run, and what of it was skipped. */
function mcpContent(file: IProjectFileInfo): HTMLElement[] {
  const blocks: HTMLElement[] = [];
  const servers = element('ul', 'pal-context-content pal-context-servers', 'pal-context-servers');
  for (const server of file.servers) {
    servers.append(element('li', 'pal-context-server', 'pal-context-server', serverLine(server)));
  }
  if (!file.servers.length) {
    servers.append(element('li', 'pal-context-server', undefined, 'no servers'));
  }
  blocks.push(servers);
  for (const problem of file.problems) {
    blocks.push(element('div', 'pal-context-problem', 'pal-context-problem', problem));
  }
  return blocks;
}

function serverLine(server: IMcpServerView): string {
  const parts = [`${server.name}:`];
  if (server.transport === 'stdio') {
    parts.push([server.command, ...server.args].join(' '));
    if (server.cwd) {
      parts.push(`(in ${server.cwd})`);
    }
  } else {
    parts.push(server.url);
  }
  if (server.env.length) {
    parts.push(`env: ${server.env.join(', ')}`);
  }
  if (server.headers.length) {
    parts.push(`headers: ${server.headers.join(', ')}`);
  }
  return parts.join(' ');
}

/** Trust exactly these bytes of one project file; the button says what happened. */
function projectTrustButton(
  path: string,
  sha256: string,
  trust: (path: string, sha256: string) => Promise<string>
): HTMLElement {
  const cell = element('div', 'pal-trust', 'pal-context-trust');
  const trustNow = button('Trust', 'pal-context-trust-button');
  trustNow.title =
    `Trust ${path} as shown (sha256 ${sha256.slice(0, 12)}…): ` +
    'it enters the prompt from the next model call';
  const result = element('span', 'pal-trust-result', 'pal-context-trust-result', '');
  result.setAttribute('role', 'status');
  trustNow.addEventListener('click', () => {
    trustNow.disabled = true;
    result.textContent = 'Trusting…';
    trust(path, sha256).then(
      text => {
        result.textContent = text;
        trustNow.textContent = 'Trusted';
      },
      (error: unknown) => {
        const why = error instanceof Error ? error.message : String(error);
        result.textContent = `Could not trust: ${why}`;
        trustNow.disabled = false;
      }
    );
  });
  cell.append(trustNow, result);
  return cell;
}

/** `/model`: the session's model and the ones offered; a click puts `/model NAME` into the input. */
export function renderModels(answer: IModelList, context: ICommandViewContext): HTMLElement {
  const view = frame(`Model: ${answer.current ?? 'unknown'}`, 'pal-models', context);
  const list = element('ul', 'pal-models-list');
  for (const model of answer.models) {
    const item = element('li', 'pal-models-item', 'pal-models-item');
    const current = model.name === answer.current;
    item.dataset.current = current ? 'true' : 'false';
    const price = model.price
      ? `$${model.price.input} in / $${model.price.output} out per M tokens`
      : 'no declared price';
    const pick = element('button', 'pal-help-usage', 'pal-models-use', model.name);
    pick.type = 'button';
    pick.title = current ? 'The session runs on this model' : 'Put /model with this name into the input';
    pick.addEventListener('click', () => context.setInput(`/model ${model.name}`));
    item.append(
      pick,
      ` ${current ? '(current) · ' : ''}${formatTokens(model.context_window)} window · ${price}`
    );
    list.append(item);
  }
  view.append(list);
  return view;
}
