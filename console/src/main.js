// The console's entry point: renders the app into <body>.

import './style.css';
import { html, render } from './html.js';
import { App } from './views/app.js';

render(html`<${App} />`, document.getElementById('app'));
