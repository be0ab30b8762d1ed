/**
 * The step-through view (docs/teaching.md, "Step-through"): a main-area
 * widget beside the notebook that shows a saved session one step at a time:
 * Previous / Next (and the arrow keys Left / Right), the step counter, the
 * message that opened the turn, the model's text (Markdown, as the chat
 * renders it), the cell (a highlighted code block, as in the chat) and the
 * observation exactly as the model read it, the lines where the output was
 * cut marked. The sub-agents the step spawned get a lane each, side by side
 * (stacked when the view is narrow), each with its own Previous / Next. The
 * state is StepThroughModel's (stepThrough.ts).
 */
import { Widget } from '@lumino/widgets';

import { button, element } from './dom';
import {
  codeMarkdown,
  type ILane,
  observationLines,
  stepDelta,
  stepHeading,
  type StepCursor,
  type StepThroughModel,
  tokenLine
} from './stepThrough';
import type { ISessionStep } from './wire';

export interface IStepThroughViewOptions {
  /** Renders Markdown into `host` (the chat's renderer); null: plain text. */
  renderMarkdown: ((host: HTMLElement, source: string) => Promise<void>) | null;
  /** Called with the session's current step (to scroll the notebook to its cell). */
  stepShown?: (step: ISessionStep) => void;
}

export class StepThroughView extends Widget {
  constructor(
    readonly model: StepThroughModel,
    private readonly _options: IStepThroughViewOptions
  ) {
    super();
    this.id = `pal-step-through-${model.sessionId}`;
    this.addClass('pal-StepThrough');
    this.node.dataset.testid = 'pal-step-through';
    this.node.tabIndex = 0;
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', `Step-through of session ${model.sessionId}`);
    this.title.label = `Steps: ${model.sessionId}`;
    this.title.caption = `Step through session ${model.sessionId} (Left / Right: previous / next)`;
    this.title.closable = true;
    this.node.addEventListener('keydown', event => this._onKey(event));
    model.changed.connect(this.render, this);
    this.render();
  }

  render(): void {
    const model = this.model;
    const root = model.root;
    if (!root) {
      const status = element(
        'div',
        'pal-step-status',
        'pal-step-status',
        model.error ?? 'Loading the steps…'
      );
      status.setAttribute('role', model.error ? 'alert' : 'status');
      this.node.replaceChildren(status);
      return;
    }
    const focused = this._focusedPlace();
    const header = element('div', 'pal-step-header');
    const where = element('div', 'pal-step-session', 'pal-step-session', sessionLine(root));
    header.append(where, navigation(root, 'pal-step', delta => model.move(delta)));
    if (root.session.broken) {
      const damage = `This log is damaged (${root.session.broken}): the steps before it are shown.`;
      const note = element('div', 'pal-step-status', 'pal-step-broken', damage);
      note.setAttribute('role', 'alert');
      header.append(note);
    }
    const main = element('div', 'pal-step-main', 'pal-step-main');
    const step = root.current;
    main.append(step ? this._step(step, true) : element('p', 'pal-step-empty', undefined, ''));
    const lanes = element('div', 'pal-step-lanes', 'pal-step-lanes');
    lanes.append(...model.lanes.map(lane => this._lane(lane)));
    lanes.hidden = model.lanes.length === 0;
    this.node.replaceChildren(header, main, lanes);
    this._restoreFocus(focused);
    if (step && this._shown !== step) {
      this._shown = step;
      this._options.stepShown?.(step);
    }
  }

  override dispose(): void {
    if (!this.isDisposed) {
      this.model.changed.disconnect(this.render, this);
    }
    super.dispose();
  }

  protected override onActivateRequest(): void {
    this.node.focus();
  }

  private _step(step: ISessionStep, withMessage: boolean): HTMLElement {
    const node = element('article', 'pal-step', 'pal-step');
    node.dataset.index = String(step.index);
    node.append(element('div', 'pal-step-heading', 'pal-step-heading', stepHeading(step)));
    if (withMessage && step.user_message !== null) {
      const who = step.user_from ? `Message from ${step.user_from}` : 'Your message';
      node.append(labelled('pal-step-user', who, plain(step.user_message)));
    }
    for (const text of step.received) {
      node.append(labelled('pal-step-received', 'Read before this step', plain(text)));
    }
    if (step.text) {
      node.append(labelled('pal-step-text', 'The model', this._markdown(step.text)));
    }
    const tokens = tokenLine(step);
    if (tokens) {
      node.append(element('div', 'pal-step-tokens', 'pal-step-tokens', tokens));
    }
    if (step.code !== null) {
      node.append(labelled('pal-step-code', 'Cell', this._markdown(codeMarkdown(step.code))));
    }
    if (step.observation !== null) {
      node.append(labelled('pal-step-observation', 'What the model saw', observation(step)));
    }
    if (step.children.length) {
      const names = step.children.map(c => c.name).join(', ');
      node.append(element('div', 'pal-step-spawned', 'pal-step-spawned', `Sub-agents: ${names}`));
    }
    return node;
  }

  private _lane(lane: ILane): HTMLElement {
    const node = element('section', 'pal-step-lane', 'pal-step-lane');
    node.dataset.sessionId = lane.child.session_id;
    node.setAttribute('aria-label', `Sub-agent ${lane.child.name}`);
    const head = element('div', 'pal-step-lane-head');
    head.append(element('h3', 'pal-step-lane-name', 'pal-step-lane-name', lane.child.name));
    head.title = lane.child.task;
    node.append(head);
    if (lane.error) {
      const error = element('div', 'pal-step-status', 'pal-step-lane-error', lane.error);
      error.setAttribute('role', 'alert');
      node.append(error);
    } else if (!lane.cursor) {
      node.append(element('div', 'pal-step-status', 'pal-step-lane-status', 'Loading…'));
    } else {
      const cursor = lane.cursor;
      const id = lane.child.session_id;
      head.append(navigation(cursor, 'pal-step-lane', delta => this.model.moveLane(id, delta)));
      const step = cursor.current;
      if (step) {
        node.append(this._step(step, cursor.index === 0));
        const inner = this.model.lanesOf(step); // its own sub-agents, nested
        if (inner.length) {
          const lanes = element('div', 'pal-step-lanes', 'pal-step-lanes');
          lanes.append(...inner.map(lane => this._lane(lane)));
          node.append(lanes);
        }
      }
    }
    return node;
  }

  private _markdown(source: string): HTMLElement {
    const node = element('div', 'pal-assistant pal-step-markdown', undefined, source);
    const render = this._options.renderMarkdown;
    if (render) {
      node.classList.add('pal-mod-markdown', 'jp-RenderedHTMLCommon');
      render(node, source).catch(error => {
        node.textContent = source;
        console.warn('prime-agent: could not render Markdown', error);
      });
    }
    return node;
  }

  private _onKey(event: KeyboardEvent): void {
    const target = event.target as HTMLElement | null;
    if (event.altKey || event.ctrlKey || event.metaKey || target?.closest('input, textarea')) {
      return;
    }
    const delta = stepDelta(event.key);
    if (delta === 0) {
      return;
    }
    event.preventDefault();
    event.stopPropagation();
    const lane = target?.closest<HTMLElement>('.pal-step-lane');
    if (lane?.dataset.sessionId) {
      this.model.moveLane(lane.dataset.sessionId, delta);
    } else {
      this.model.move(delta);
    }
  }

  /** The control that had the focus before a render (its lane and test id), if any. */
  private _focusedPlace(): { lane: string | null; testId: string } | null {
    const active = document.activeElement;
    if (!(active instanceof HTMLElement) || active === this.node || !this.node.contains(active)) {
      return null;
    }
    const lane = active.closest<HTMLElement>('.pal-step-lane')?.dataset.sessionId ?? null;
    return { lane, testId: active.dataset.testid ?? '' };
  }

  /** A render replaces the buttons: the focus goes to the same one, else to the view. */
  private _restoreFocus(place: { lane: string | null; testId: string } | null): void {
    if (!place) {
      return;
    }
    const scope = place.lane
      ? this.node.querySelector<HTMLElement>(`.pal-step-lane[data-session-id="${place.lane}"]`)
      : this.node;
    const control = place.testId
      ? scope?.querySelector<HTMLButtonElement>(`[data-testid="${place.testId}"]`)
      : null;
    (control && !control.disabled ? control : this.node).focus();
  }

  private _shown: ISessionStep | null = null;
}

function sessionLine(root: StepCursor): string {
  const session = root.session;
  const name = session.name ? `${session.name} · ` : '';
  return `${name}${session.notebook_path} · ${session.session_id}`;
}

function navigation(
  cursor: StepCursor,
  prefix: string,
  move: (delta: number) => void
): HTMLElement {
  const nav = element('div', `${prefix}-nav pal-step-nav`);
  nav.setAttribute('role', 'group');
  const previous = button('Previous', `${prefix}-previous`);
  previous.disabled = cursor.atStart;
  previous.title = 'Previous step (Left arrow)';
  previous.addEventListener('click', () => move(-1));
  const next = button('Next', `${prefix}-next`);
  next.disabled = cursor.atEnd;
  next.title = 'Next step (Right arrow)';
  next.addEventListener('click', () => move(1));
  const counter = element('span', 'pal-step-counter', `${prefix}-counter`, cursor.counter);
  counter.setAttribute('aria-live', 'polite');
  nav.append(previous, counter, next);
  return nav;
}

function labelled(testId: string, label: string, body: HTMLElement): HTMLElement {
  const node = element('section', `pal-step-part ${testId}`, testId);
  node.append(element('div', 'pal-step-label', undefined, label), body);
  return node;
}

function plain(text: string): HTMLElement {
  return element('div', 'pal-step-plain', undefined, text);
}

function observation(step: ISessionStep): HTMLElement {
  const pre = element('pre', 'pal-step-output');
  for (const line of observationLines(step)) {
    const span = element('span', line.cut ? 'pal-step-cut' : 'pal-step-line', undefined);
    span.textContent = `${line.text}\n`;
    if (line.cut) {
      span.dataset.testid = 'pal-step-cut';
      span.title = 'The output was cut here: the model saw only the head and the tail';
    }
    pre.append(span);
  }
  if (step.images) {
    pre.append(element('span', 'pal-step-line', undefined, `[${step.images} image(s)]\n`));
  }
  return pre;
}
