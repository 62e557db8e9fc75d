/** The console's entry: mounts the app (console/index.html loads this). */
// First: starts the development token's request before anything else evaluates.
import './boot';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './app';
import './styles.css';

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
