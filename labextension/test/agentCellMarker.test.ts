import { describe, expect, it } from 'vitest';

import { badgeText } from '../src/agentCellMarker';

describe('agent cell badges', () => {
  it('names an agent cell by its turn', () => {
    expect(badgeText({ session_id: 's', turn: 2, role: 'agent' })).toBe('agent · turn 2');
    expect(badgeText({ role: 'backlink' })).toBe('agent');
  });

  it('names a narration cell as the turn’s message or answer, not agent code', () => {
    const narration = { session_id: 's', turn: 3, role: 'narration' };
    expect(badgeText({ ...narration, narrates: 'user' })).toBe('message · turn 3');
    expect(badgeText({ ...narration, narrates: 'answer' })).toBe('answer · turn 3');
    expect(badgeText({ ...narration, narrates: 'answer', branch: 'other' })).toBe(
      'answer · turn 3 · other branch'
    );
  });
});
