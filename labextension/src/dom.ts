/** Small DOM builders shared by the panel's views. */

/** An element with a class, and optionally a test id and text. */
export function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  testId?: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (testId) {
    node.dataset.testid = testId;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** A `pal-button` whose class and test id are both `testId`. */
export function button(label: string, testId: string): HTMLButtonElement {
  const node = element('button', `pal-button ${testId}`, testId, label);
  node.type = 'button';
  return node;
}
