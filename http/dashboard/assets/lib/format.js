// Formatting of the API's figures for display; '–' stands for a missing one.

export const fmtInt = (n) => (n === null || n === undefined ? '–' : Math.round(Number(n)).toLocaleString('en-US'));
export const fmtRate = (n) => (n === null || n === undefined ? '–' : Number(n).toLocaleString('en-US', { maximumFractionDigits: 2 }));
export function fmtAge(sec) {
  if (sec === null || sec === undefined) return '–';
  sec = Math.round(sec);
  if (sec < 60) return sec + ' s';
  if (sec < 3600) return Math.floor(sec / 60) + ' min ' + (sec % 60) + ' s';
  if (sec < 86400) return Math.floor(sec / 3600) + ' h ' + Math.floor((sec % 3600) / 60) + ' min';
  return Math.floor(sec / 86400) + ' d ' + Math.floor((sec % 86400) / 3600) + ' h';
}
// fmtDuration is a span of milliseconds: ms under a second, seconds with
// milliseconds under a minute, fmtAge's form past that.
export function fmtDuration(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 1000) return Math.round(ms) + ' ms';
  if (ms < 60000) return (ms / 1000).toFixed(3) + ' s';
  return fmtAge(ms / 1000);
}
export function fmtTime(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
}
export const fmtBytes = (n) => (n === null || n === undefined ? '–' : (n / 1048576).toFixed(1) + ' MiB');
export function preview(v, max = 120) {
  if (v === undefined) return '';
  const s = JSON.stringify(v);
  return s.length > max ? s.slice(0, max) + '…' : s;
}
