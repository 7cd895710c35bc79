// What every page builds on: htm's html tag bound to Preact, the app's
// context and the hooks that read and sort the API's figures.
import { h, createContext } from 'preact';
import { useState, useEffect, useContext, useMemo, useCallback } from 'preact/hooks';
import htm from 'htm';

export const html = htm.bind(h);

// REFRESH_MS is how often a page reads its figures again: often enough to
// watch a backlog drain, rare enough that a few open tabs cost the broker
// nothing measurable (a page makes 3 to 6 reads a refresh).
export const REFRESH_MS = 5000;

// UI is what every page needs from the app: whether admin actions are
// allowed, the confirmation dialog and the notices.
export const UI = createContext(null);

// usePoll runs load now and then every `every` ms (REFRESH_MS unless
// given) while live refresh is on, skipping the reads while the tab is
// hidden, and keeps the last data through a failed read. reload reads
// again at once.
export function usePoll(load, deps, every = REFRESH_MS) {
  const { live } = useContext(UI);
  const [state, setState] = useState({ data: null, error: null });
  const [n, setN] = useState(0);
  useEffect(() => {
    let stopped = false;
    let first = true;
    let timer;
    const run = async () => {
      if (first || !document.hidden) {
        first = false;
        try {
          const data = await load();
          if (!stopped) setState({ data, error: null });
        } catch (e) {
          if (!stopped) setState((s) => ({ data: s.data, error: e }));
        }
      }
      if (!stopped && live) timer = setTimeout(run, every);
    };
    run();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [...deps, n, live, every]);
  return [state, useCallback(() => setN((x) => x + 1), [])];
}

// useSort sorts rows by the column the user picks (a header click; again
// to reverse), text columns ascending first, numbers descending first.
export function useSort(rows, initial) {
  const [sort, setSort] = useState({ col: initial, dir: 1 });
  const sorted = useMemo(() => {
    if (!rows) return [];
    const out = [...rows];
    out.sort((a, b) => {
      const x = a[sort.col];
      const y = b[sort.col];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * sort.dir;
    });
    return out;
  }, [rows, sort]);
  const Th = ({ col, children, num }) => html`<th class=${num ? 'num sortable' : 'sortable'} data-sort=${col}
      aria-sort=${sort.col === col ? (sort.dir > 0 ? 'ascending' : 'descending') : 'none'}
      onClick=${() => setSort((s) => ({ col, dir: s.col === col ? -s.dir : num ? -1 : 1 }))}>${children}${
    sort.col === col ? (sort.dir > 0 ? ' ▲' : ' ▼') : ''
  }</th>`;
  return [sorted, Th];
}
