import { LabIcon } from '@jupyterlab/ui-components';

const PRIME_AGENT_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <path class="jp-icon3" fill="#616161" d="M10 2.5l1.9 5.6 5.6 1.9-5.6 1.9L10 17.5l-1.9-5.6L2.5 10l5.6-1.9z"/>
  <path class="jp-icon3" fill="#616161" d="M18 13.5l1 2.9 2.9 1-2.9 1-1 2.9-1-2.9-2.9-1 2.9-1z"/>
</svg>`;

export const primeAgentIcon = new LabIcon({
  name: 'prime-agent-lab:agent',
  svgstr: PRIME_AGENT_SVG
});
