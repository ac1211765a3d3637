// Hooks shared by the views: polling while the page is visible, the
// current time.

import { useEffect, useRef } from './html.js';

/**
 * Call `fn` (async) now and then every `ms` after it settles, while the
 * browser tab is visible; again at once when it becomes visible. Restarts
 * when `deps` change; stops on unmount.
 */
export function usePoll(fn, ms, deps) {
  const latest = useRef(fn);
  latest.current = fn;
  useEffect(() => {
    let stopped = false;
    let running = false;
    let timer = null;
    const tick = async () => {
      clearTimeout(timer);
      if (stopped || document.hidden || running) return;
      running = true;
      try {
        await latest.current();
      } catch {
        // the poll function shows its own errors
      } finally {
        running = false;
      }
      if (!stopped && !document.hidden) timer = setTimeout(tick, ms);
    };
    const onVisibility = () => {
      if (!document.hidden) tick();
    };
    tick();
    document.addEventListener('visibilitychange', onVisibility);
    return () => {
      stopped = true;
      clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisibility);
    };
  }, deps);
}
