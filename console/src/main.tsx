/** The console's entry: mounts the app (console/index.html loads this). */
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './app';
import { prefetchDevelopmentToken } from './session';
import './styles.css';

prefetchDevelopmentToken();

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
