/**
 * Wire types of the Prime Agent server API (docs/api.md).
 *
 * GENERATED from prime_agent_lab/core/wire.py (and the session entry types of
 * core/entry_types.py); do not edit. Regenerate with
 *   python -m prime_agent_lab.core.wire --ts > labextension/src/wire.ts
 */

export type SessionStatus = 'idle' | 'running' | 'inactive' | 'broken';

export type CellStatus = 'ok' | 'error' | 'timeout' | 'died' | 'interrupted' | 'aborted' | 'skipped';

export type CellDecision = 'skip' | 'edit';

export type StopReason = 'end_turn' | 'stopped' | 'shutdown' | 'error' | 'max_iterations' | 'interrupted';

export type NoticeKind = 'kernel_restarted' | 'kernel_restarted_externally' | 'kernel_died' | 'kernel_package_problem' | 'output_rate_limited' | 'cell_restored' | 'child_completed' | 'child_error' | 'child_stopped' | 'message_undeliverable' | 'forked' | 'compacted' | 'compaction_failed' | 'kernel_gc' | 'kernel_state_restored' | 'kernel_state_not_restored' | 'session_untrusted' | 'session_trusted' | 'project_untrusted' | 'continuation' | 'gate_passed' | 'gate_failed' | 'autonomy' | 'goal' | 'session_unreadable' | 'mcp_call' | 'mcp_call_failed' | 'turn_reverted' | 'plan_not_run';

export type ErrorKind = 'provider' | 'kernel' | 'notebook' | 'tool_arguments' | 'internal' | 'disk';

export type Relationship = 'parent' | 'child' | 'sibling';

export type ChildStatus = 'running' | 'idle' | 'inactive' | 'replied' | 'completed' | 'error' | 'stopped';

export type DeliveryMode = 'auto' | 'steer' | 'follow_up';

export type ScheduleOwner = 'user' | 'agent' | 'cli';

export type ScheduleKind = 'every' | 'cron' | 'in' | 'at';

export type HeartbeatPhase = 'claimed' | 'delivered' | 'skipped' | 'interrupted';

export type RefineScope = 'local' | 'global';

export type EditAction = 'create' | 'update' | 'delete';

export type UntrustedKind = 'snapshot' | 'harness' | 'mail' | 'schedules' | 'autonomy' | 'goal';

export type QueueChange = 'queued' | 'removed' | 'started' | 'paused' | 'resumed';

export type SessionEntryType = 'user_message' | 'assistant_message' | 'cell_started' | 'tool_result' | 'agent_message' | 'continuation' | 'notice' | 'error' | 'turn_end' | 'model_change' | 'notebook_moved' | 'compaction' | 'kernel_gc' | 'refinement' | 'refine_review' | 'message_sent' | 'child_spawned' | 'gate_run' | 'autonomy' | 'goal' | 'mcp_call' | 'permission_change' | 'cell_approval' | 'turn_reverted';

export type PermissionMode = 'plan' | 'ask' | 'auto';

export type AgentState = 'running' | 'idle' | 'waiting';

export type AgentWaitingFor = 'mail' | 'child';

export type AgentOutcome = 'replied' | 'completed' | 'error' | 'stopped';

export type AgentResidency = 'resident' | 'evicted';

export type AgentDelivery = 'chat' | 'mail';

export interface IServerInfo {
  version: string;
  provider: string;
  model: string;
  output_cap?: number;
  cell_timeout?: number;
  locked_settings?: string[];
}

export interface ISessionInfo {
  session_id: string;
  notebook_path: string | null;
  parent_session_id?: string;
  name?: string;
  kernel_id: string | null;
  provider: string | null;
  model: string | null;
  status: SessionStatus;
  turns: number;
  created: string | null;
  updated: string | null;
  seq?: number;
  reason?: string;
}

/** One session in the session list of a notebook (`GET .../sessions?notebook=`, and `prime-agent-lab sessions`), newest first. */
export interface ISessionListItem {
  session_id: string;
  notebook_path: string;
  title: string | null;
  created: string | null;
  updated: string | null;
  provider: string | null;
  model: string | null;
  status: SessionStatus;
  turns: number;
  cost: number | null;
  cost_total: number | null;
  parent_session_id?: string;
  name?: string;
  reason?: string;
  last_user_entry_id?: string;
}

export interface ISessionList {
  sessions: ISessionListItem[];
}

/** A message that started a turn: the researcher's, or another agent's (`from_name`, ...). */
export interface IUserItem {
  type: 'user';
  turn: number;
  text: string;
  from_session_id?: string;
  from_name?: string;
  relationship?: Relationship;
  composed?: string;
  notice?: NoticeKind;
  schedule_id?: string;
  schedule_label?: string;
  schedule_owner?: ScheduleOwner;
  schedule_kind?: ScheduleKind;
  scheduled_for?: string;
  mode?: DeliveryMode;
}

export interface IAssistantItem {
  type: 'assistant';
  turn: number;
  text: string;
  usage?: Record<string, number>;
  provider?: string;
  model?: string;
  cost?: number | null;
}

export interface ICellItem {
  type: 'cell';
  turn: number;
  cell_id: string;
  code: string;
  status: CellStatus;
  execution_count: number | null;
  preview: string;
  decision?: CellDecision;
}

export interface IErrorItem {
  type: 'error';
  turn: number;
  message: string;
}

/** A stop notice (`stop_reason`) or a kernel notice (`kind`). */
export interface INoticeItem {
  type: 'notice';
  turn: number | null;
  text: string;
  stop_reason?: StopReason;
  kind?: NoticeKind;
  code?: string;
}

/** Another agent's message taken into a running turn (or a heartbeat's tick). */
export interface IAgentMessageItem {
  type: 'agent_message';
  turn: number;
  text: string;
  from_session_id?: string;
  from_name: string;
  relationship?: Relationship;
  composed: string;
  notice?: NoticeKind;
  schedule_id?: string;
  schedule_label?: string;
  schedule_owner?: ScheduleOwner;
  schedule_kind?: ScheduleKind;
  scheduled_for?: string;
}

/** A sub-agent this agent spawned (`rlm(...)`): its notebook opens from the chat. */
export interface IChildItem {
  type: 'child';
  turn: number | null;
  rlm_child_id: string;
  name: string;
  notebook_path: string;
  task: string;
  spawn_cell_id?: string;
  status?: ChildStatus;
  preview?: string;
}

export interface ISessionWithTranscript {
  session_id: string;
  notebook_path: string | null;
  parent_session_id?: string;
  name?: string;
  kernel_id: string | null;
  provider: string | null;
  model: string | null;
  status: SessionStatus;
  turns: number;
  created: string | null;
  updated: string | null;
  seq?: number;
  reason?: string;
  transcript: ChatItem[];
  queue?: IQueueState;
}

/** Where a fork or clone came from: the session, and the entry forked at (the user message) or cloned at (the leaf then). */
export interface IEntryOrigin {
  session_id: string;
  entry_id: string | null;
}

/** One entry of a session's log tree (`GET .../tree`). */
export interface ITreeNode {
  id: string;
  parent_id: string | null;
  type: SessionEntryType;
  turn: number | null;
  ts: string;
  preview: string;
  on_branch: boolean;
  branch_point: boolean;
}

export interface ISessionTree {
  session_id: string;
  leaf_id: string | null;
  entries: ITreeNode[];
  forked_from?: IEntryOrigin;
  cloned_from?: IEntryOrigin;
  broken?: string;
}

/** Answer of `POST .../leaf`. */
export interface ILeafMoved {
  leaf_id: string | null;
  marked_cells: number;
  text?: string;
}

/** Answer of `POST .../fork` and `POST .../clone`: the new session and notebook. */
export interface ISessionCopy {
  session_id: string;
  notebook_path: string;
  forked_from?: IEntryOrigin;
  cloned_from?: IEntryOrigin;
  kernel_state_copied: boolean;
  missing_cells: number;
  text?: string;
}

/** A harness entry as a refinement recorded it, before or after one edit. */
export interface IRefinedEntry {
  id: string;
  kind: string;
  title: string;
  content: string;
  path: string;
  scope: RefineScope;
  reference: Record<string, unknown>;
  arguments: Record<string, unknown>;
  metadata: Record<string, unknown>;
  source: string;
  created_at: string;
  updated_at: string;
  version: number;
}

/** One edit of a refinement: applied, or rejected with the reason in `error`. */
export interface IRefinementEdit {
  action: EditAction | string | null;
  kind: string | null;
  id: string | null;
  applied: boolean;
  error: string | null;
  before: IRefinedEntry | null;
  after: IRefinedEntry | null;
  reason?: string;
}

/** A rollback's words for the refinement it undid, so the chat names it without ids. */
export interface IRolledBack {
  summary: string;
  created_at: string;
}

/** A refinement as recorded (the store's refinements.jsonl, the session log, the event). `trigger`: `user` (chat or REST), `agent` (refine.run), `rollback`, `delete` (a user's delete from the panel), `auto:turns`, `auto:compaction`. `harness_version`: the stores' revisions after it was applied. */
export interface IRefinementRecord {
  id: string;
  trigger: string;
  scope: RefineScope;
  instructions: string | null;
  summary: string;
  rationale: string;
  expected_outcome: string;
  edits: IRefinementEdit[];
  rollback_of: string | null;
  harness_version: Record<string, number>;
  created_at: string;
  session_id: string;
  error?: string;
  rolled_back?: IRolledBack;
}

/** Answer of `POST .../refine`. */
export interface IRefineScheduled {
  scheduled: boolean;
  note?: string;
  reason?: string;
}

/** Answer of `GET .../refinements`: both stores' records, oldest first. */
export interface IRefinementList {
  refinements: IRefinementRecord[];
  problems?: string[];
}

/** Answer of `POST .../refinements/<id>/rollback`: `applied` at once (the agent was idle; `refinement` is the new record), or `queued` for the next turn boundary. */
export interface IRollbackAnswer {
  queued: boolean;
  applied: boolean;
  note: string;
  refinement?: IRefinementRecord;
}

/** A refinement in the chat transcript (`text`: the line the model also read). */
export interface IRefinementItem {
  type: 'refinement';
  turn: number | null;
  text: string;
  refinement: IRefinementRecord;
}

/** Something in a session's folder this user did not sign, held back until trusted. */
export interface IUntrustedPart {
  session_id: string;
  where: string;
  kind: UntrustedKind;
  what: string;
}

/** Answer of `GET .../trust` and `POST .../trust`. */
export interface ITrustState {
  trusted: boolean;
  untrusted: IUntrustedPart[];
  signed?: IUntrustedPart[];
}

/** The budgets of an autonomous run (`timeout_minutes`: wall time from its start). */
export interface IAutonomyBudgets {
  max_turns: number;
  max_tokens: number;
  timeout_minutes: number;
  continuations: number;
}

/** The session's current (or last) autonomous run: what it used, and how it ended (`reason` null while it runs: `gates_passed`, `goal_complete`, `continuations_used`, `retries_exhausted`, `max_turns`, `max_tokens`, `timeout`, `stopped`, `error`). */
export interface IAutonomyRun {
  started: string;
  turns: number;
  tokens: number;
  elapsed_seconds: number;
  continuations: number;
  reason: string | null;
}

/** Answer of `GET` and `PUT .../sessions/<id>/autonomy`, and the `autonomy` event's state. */
export interface IAutonomyState {
  enabled: boolean;
  budgets: IAutonomyBudgets;
  gates: string[];
  run: IAutonomyRun | null;
}

/** Body of `PUT .../sessions/<id>/autonomy`: budgets and gates left out stay as they are. */
export interface IAutonomyUpdate {
  enabled: boolean;
  budgets?: IAutonomyBudgets;
  gates?: string[];
}

/** One of the user's messages waiting for the agent (removable until it starts). */
export interface IQueuedMessage {
  message_id: string;
  text: string;
  mode: 'steer' | 'follow_up';
  composed: string;
}

/** The user's queue of one session, in the order queued (a steer enters the running turn before any follow-up starts). */
export interface IQueueState {
  items: IQueuedMessage[];
  paused: boolean;
}

/** Answer of `POST .../sessions/<id>/messages` and `POST .../messages/<message_id>/send`. */
export interface IMessagePosted {
  mode: DeliveryMode;
  delivery_status: 'started' | 'queued' | 'steer';
  turn?: number;
  message_id?: string;
  queue?: IQueueState;
}

/** Who answered one model call and what it cost (US dollars; None: no declared price). */
export interface IAnswerCost {
  provider: string;
  model: string;
  cost: number | null;
}

/** US dollars per million tokens, as the provider declares them. */
export interface IModelPrice {
  input: number;
  output: number;
  cache_read: number;
  cache_write: number;
}

export interface IModelInfo {
  name: string;
  provider: string;
  model: string;
  context_window: number;
  price?: IModelPrice;
}

/** Answer of `GET /prime-agent/api/models` (no `current`) and of `POST .../model` and `/model` (`current`: the model the session's next call uses). */
export interface IModelList {
  models: IModelInfo[];
  current?: string;
}

/** `GET/PUT .../sessions/<id>/permission`: the session's mode, the administrator's cap (`max_permission`) and the tool calls whose cells wait for approval now. */
export interface IPermissionState {
  mode: PermissionMode;
  cap: PermissionMode;
  waiting: string[];
}

/** One cell a turn wrote into the notebook, in the order they entered it. */
export interface ITurnCell {
  cell_id: string;
  tool_call_id: string;
  execution_count: number | null;
  status: string;
  first_line: string;
  in_notebook: boolean;
  code: string;
}

/** Whether "revert turn" can bring the kernel back to how it was as the turn began. */
export interface ITurnKernel {
  restorable: boolean;
  reason: string | null;
  snapshot_time: string | null;
}

/** `GET .../sessions/<id>/turns/<turn>`: the cells one turn wrote and what a revert can do. */
export interface ITurnReview {
  session_id: string;
  turn: number;
  cells: ITurnCell[];
  kernel: ITurnKernel;
  reverted: boolean;
}

export interface IFailedName {
  name: string;
  reason: string;
}

/** A cell of the turn a revert left in the notebook, and why. */
export interface IKeptCell {
  cell_id: string;
  first_line: string;
  reason: string;
}

/** `POST .../sessions/<id>/turns/<turn>/revert`: what the revert did. */
export interface ITurnRevert {
  turn: number;
  cells_removed: string[];
  cells_kept: IKeptCell[];
  whole_turn: boolean;
  kernel: 'restored' | 'not_restored' | 'untouched';
  restored: string[];
  removed: string[];
  failed: IFailedName[];
  reason: string | null;
  text: string;
}

/** A sub-agent a step's cell spawned; its steps are `GET .../sessions/<session_id>/steps`. */
export interface IStepChild {
  session_id: string;
  name: string;
  notebook_path: string;
  task: string;
}

/** One cell the model asked to run (or an answer without a cell), as the model saw it. */
export interface ISessionStep {
  index: number;
  turn: number | null;
  entry_id: string;
  user_message: string | null;
  user_from: string | null;
  received: string[];
  text: string;
  call_index: number;
  tool_call_id: string | null;
  code: string | null;
  cell_id: string | null;
  status: string | null;
  execution_count: number | null;
  observation: string | null;
  cut_lines: number[];
  images: number;
  provider: string | null;
  model: string | null;
  usage: Record<string, number> | null;
  answered_at: string | null;
  finished_at: string | null;
  model_seconds: number | null;
  cell_seconds: number | null;
  children: IStepChild[];
}

/** `GET .../sessions/<id>/steps`: a session's steps on the path to its leaf. */
export interface ISessionSteps {
  session_id: string;
  notebook_path: string;
  name: string | null;
  parent_session_id: string | null;
  steps: ISessionStep[];
  broken: string | null;
}

export interface IAgentTokens {
  input: number;
  output: number;
}

/** One agent in the Agents View (`GET /prime-agent/api/agents`, `prime-agent-lab agents`). */
export interface IAgentRow {
  session_id: string;
  name: string;
  parent_id: string | null;
  root_id: string;
  depth: number;
  notebook: string | null;
  state: AgentState;
  waiting_for: AgentWaitingFor | null;
  outcome: AgentOutcome | null;
  residency: AgentResidency;
  model: string;
  tokens_own: IAgentTokens;
  tokens_total: IAgentTokens;
  cost_own: number | null;
  cost_total: number | null;
  last_activity: string;
  can_message: boolean;
  can_delete: boolean;
  problem: string | null;
}

/** Every agent the server knows, as a depth-first walk of the trees (roots newest first, children in creation order). */
export interface IAgentsOverview {
  agents: IAgentRow[];
  generated_at: string;
}

/** `POST .../agents/{id}/message`: a root takes it as a chat message, others as mail. */
export interface IAgentMessageSent {
  delivered: AgentDelivery;
}

/** `POST .../agents/{id}/stop`: the agents a stop reached (the one named, or its subtree). */
export interface IAgentsStopped {
  stopped: string[];
}

/** `inactive`: the agent left memory. `taken_over_by` names the session that took the notebook's kernel from it (another session took over the notebook); without it the session was only unloaded (an idle sub-agent evicted, a sub-agent deleted) and nobody replaced it. */
export interface IStatusEvent {
  seq: number;
  session_id: string;
  type: 'status';
  status: SessionStatus;
  taken_over_by?: string;
}

/** A turn begins. A turn started by another agent's message names its sender. */
export interface ITurnStartedEvent {
  seq: number;
  session_id: string;
  type: 'turn_started';
  turn: number;
  text: string;
  message_id?: string;
  from_session_id?: string;
  from_name?: string;
  relationship?: Relationship;
  composed?: string;
  mode?: DeliveryMode;
  notice?: NoticeKind;
  schedule_id?: string;
  schedule_label?: string;
  schedule_owner?: ScheduleOwner;
  schedule_kind?: ScheduleKind;
  scheduled_for?: string;
  from_user?: boolean;
}

/** Another agent's message (or a steer tick of a heartbeat, or the user's steer: `from_user`), taken into the running turn between two model calls. */
export interface IAgentMessageEvent {
  seq: number;
  session_id: string;
  type: 'agent_message';
  turn: number;
  text: string;
  message_id: string;
  from_session_id?: string;
  from_name?: string;
  relationship?: Relationship;
  composed: string;
  mode: DeliveryMode;
  notice?: NoticeKind;
  schedule_id?: string;
  schedule_label?: string;
  schedule_owner?: ScheduleOwner;
  schedule_kind?: ScheduleKind;
  scheduled_for?: string;
  from_user?: boolean;
}

export interface ITextDeltaEvent {
  seq: number;
  session_id: string;
  type: 'text_delta';
  turn: number;
  text: string;
}

export interface IAssistantMessageEvent {
  seq: number;
  session_id: string;
  type: 'assistant_message';
  turn: number;
  text: string;
  tool_calls: number;
  usage?: Record<string, number>;
  provider?: string;
  model?: string;
  cost?: number | null;
}

/** The agent's cell is in the notebook. */
export interface ICellStartedEvent {
  seq: number;
  session_id: string;
  type: 'cell_started';
  turn: number;
  cell_id: string;
  code: string;
}

/** The cell is written but held until the user's running cell finishes. */
export interface ICellWaitingEvent {
  seq: number;
  session_id: string;
  type: 'cell_waiting';
  turn: number;
  cell_id: string;
  text: string;
}

/** The cell was submitted to the kernel and runs. */
export interface ICellRunningEvent {
  seq: number;
  session_id: string;
  type: 'cell_running';
  turn: number;
  cell_id: string;
}

export interface ICellFinishedEvent {
  seq: number;
  session_id: string;
  type: 'cell_finished';
  turn: number;
  cell_id: string;
  status: CellStatus;
  execution_count: number | null;
  preview: string;
  decision?: CellDecision;
}

export interface IRetryEvent {
  seq: number;
  session_id: string;
  type: 'retry';
  turn: number;
  attempt: number;
  delay: number;
  message: string;
}

export interface IErrorEvent {
  seq: number;
  session_id: string;
  type: 'error';
  turn?: number;
  message: string;
  kind: ErrorKind;
}

export interface INoticeEvent {
  seq: number;
  session_id: string;
  type: 'notice';
  turn?: number;
  kind: NoticeKind;
  text: string;
  reason?: string;
  code?: string;
}

/** The notebook was renamed; the session follows it. */
export interface INotebookMovedEvent {
  seq: number;
  session_id: string;
  type: 'notebook_moved';
  old_path: string;
  path: string;
}

/** The session's model was switched; the next model call uses it (docs/pairing.md). */
export interface IModelChangeEvent {
  seq: number;
  session_id: string;
  type: 'model_change';
  provider: string;
  model: string;
}

/** This agent spawned a sub-agent; its notebook exists and its first task is starting. */
export interface IChildSpawnedEvent {
  seq: number;
  session_id: string;
  type: 'child_spawned';
  turn?: number;
  rlm_child_id: string;
  name: string;
  session_dir?: string;
  notebook_path: string;
  task: string;
  model: string;
  spawn_cell_id?: string;
}

/** A sub-agent of this agent changed state (`preview`: the start of its last answer). */
export interface IChildStatusEvent {
  seq: number;
  session_id: string;
  type: 'child_status';
  rlm_child_id: string;
  name: string;
  notebook_path: string;
  status: ChildStatus;
  preview?: string;
}

/** The session's leaf moved (a branch): reload the transcript, it shows the new branch. */
export interface IBranchMovedEvent {
  seq: number;
  session_id: string;
  type: 'branch_moved';
  leaf_id: string | null;
  marked_cells: number;
  text?: string;
}

export interface ITurnEndedEvent {
  seq: number;
  session_id: string;
  type: 'turn_ended';
  turn: number;
  stop_reason: StopReason;
  final_text: string;
}

/** A refinement was applied, rolled back or failed (docs/harness.md). */
export interface IRefinementEvent {
  seq: number;
  session_id: string;
  type: 'refinement';
  turn?: number;
  refinement: IRefinementRecord;
  text: string;
}

/** A gate of an autonomous run ran (or was not re-run on an unchanged workspace). */
export interface IGateRunEvent {
  seq: number;
  session_id: string;
  type: 'gate_run';
  turn?: number;
  command: string;
  kind: 'shell' | 'python';
  attempt: number;
  exit_status: number | null;
  passed: boolean;
  seconds: number;
  output: string;
  skipped_unchanged: boolean;
  text: string;
}

/** The session's autonomy state changed: turned on or off, a run started, made a model call or ended. */
export interface IAutonomyEvent {
  seq: number;
  session_id: string;
  type: 'autonomy';
  state: IAutonomyState;
}

/** A scheduled job's tick (docs/autonomy.md), on the target agent's bus. */
export interface IHeartbeatEvent {
  seq: number;
  session_id: string;
  type: 'heartbeat';
  phase: HeartbeatPhase;
  schedule_id: string;
  label: string;
  owner: ScheduleOwner;
  delivery_mode: 'steer' | 'follow_up';
  next_run_at: string | null;
  run_count: number;
  scheduled_for?: string;
  coalesced?: number;
  message_id?: string;
  skipped_at?: string;
  error?: string;
}

/** The user's queue changed; `state` is the whole queue after the change. */
export interface IQueueEvent {
  seq: number;
  session_id: string;
  type: 'queue';
  change: QueueChange;
  message_id?: string;
  state: IQueueState;
}

/** The session's permission mode changed. */
export interface IPermissionEvent {
  seq: number;
  session_id: string;
  type: 'permission';
  mode: PermissionMode;
  cap: PermissionMode;
}

/** Ask mode: the agent's cell is in the notebook and waits for Run, Edit or Skip. */
export interface ICellAwaitingApprovalEvent {
  seq: number;
  session_id: string;
  type: 'cell_awaiting_approval';
  turn: number;
  cell_id: string;
  tool_call_id: string;
  code: string;
}

/** The user approved the waiting cell; `edited`: the edited code runs in a new cell. */
export interface ICellApprovedEvent {
  seq: number;
  session_id: string;
  type: 'cell_approved';
  turn: number;
  cell_id: string;
  tool_call_id: string;
  edited: boolean;
}

/** The waiting cell will not run (the user skipped it, or the turn was stopped). */
export interface ICellSkippedEvent {
  seq: number;
  session_id: string;
  type: 'cell_skipped';
  turn: number;
  cell_id: string;
  tool_call_id: string;
  decision?: CellDecision;
}

/** A turn was reverted, or cells of it removed (every viewer shows `text`). */
export interface ITurnRevertedEvent {
  seq: number;
  session_id: string;
  type: 'turn_reverted';
  turn: number;
  cells_removed: string[];
  cells_kept: IKeptCell[];
  whole_turn: boolean;
  kernel: 'restored' | 'not_restored' | 'untouched';
  restored: string[];
  removed: string[];
  failed: IFailedName[];
  reason: string | null;
  text: string;
}

export type ChatItem =
  | IUserItem
  | IAssistantItem
  | ICellItem
  | IErrorItem
  | INoticeItem
  | IAgentMessageItem
  | IChildItem
  | IRefinementItem;

export type AgentEvent =
  | IStatusEvent
  | ITurnStartedEvent
  | IAgentMessageEvent
  | ITextDeltaEvent
  | IAssistantMessageEvent
  | ICellStartedEvent
  | ICellWaitingEvent
  | ICellRunningEvent
  | ICellFinishedEvent
  | IRetryEvent
  | IErrorEvent
  | INoticeEvent
  | INotebookMovedEvent
  | IModelChangeEvent
  | IChildSpawnedEvent
  | IChildStatusEvent
  | IBranchMovedEvent
  | ITurnEndedEvent
  | IRefinementEvent
  | IGateRunEvent
  | IAutonomyEvent
  | IHeartbeatEvent
  | IQueueEvent
  | IPermissionEvent
  | ICellAwaitingApprovalEvent
  | ICellApprovedEvent
  | ICellSkippedEvent
  | ITurnRevertedEvent;

/** The notice line for a turn that ended this way. */
export const STOP_NOTICES: Partial<Record<StopReason, string>> = {
  stopped: "Stopped.",
  shutdown: "Stopped: the server (or the CLI run) was shut down during this turn.",
  interrupted: "Interrupted: the server stopped while this turn was running.",
  max_iterations: "Stopped at the limit of model calls for one turn.",
};

/** Notice kinds the chat shows as warnings (the user lost state, something failed). */
export const WARNING_NOTICES: ReadonlySet<NoticeKind> = new Set<NoticeKind>(['child_error', 'compaction_failed', 'gate_failed', 'kernel_died', 'kernel_package_problem', 'kernel_restarted', 'kernel_restarted_externally', 'kernel_state_not_restored', 'mcp_call_failed', 'message_undeliverable', 'output_rate_limited', 'project_untrusted', 'session_unreadable', 'session_untrusted']);

export type AgentEventType = AgentEvent['type'];

export type ChatItemType = ChatItem['type'];
