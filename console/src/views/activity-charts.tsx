/**
 * The overview's pictures (issue 22 item 7): outcomes per hour over the last
 * 24 hours or 7 days (committed, failed by kind, deferred) as stacked bars,
 * and the due backlog over time as a line, drawn as plain SVG from one
 * `operationActivity` read. The window is in the URL (`?activity=7d`). Live:
 * a change of any visible operation reads the window again, at most every
 * five seconds (a bar is an hour; nobody needs it faster).
 *
 * Every drawn mark carries its value (`data-count`) and the hour it stands
 * for (`data-start`), and the scale is on the chart (`data-y-max`), so what
 * is drawn can be checked against the API; a table of the same numbers is
 * one click away for those who would rather read.
 */
import { useEffect, useRef, useState, type ReactNode, type RefObject } from 'react';
import { useQuery } from 'urql';
import { ActivityWindow, ConsoleActivityDocument, type ConsoleActivityQuery } from '../../../client/generated/graphql';
import { useOperationChanges, useStoreChanges, useThrottle } from '../live';
import { Link, useRoute, withParams } from '../router';
import { ErrorState, Loading } from '../ui';

type Bucket = ConsoleActivityQuery['operationActivity']['buckets'][number];
type Outcome = 'committed' | 'retryable' | 'unknown' | 'fatal' | 'offline' | 'auth';

/** Bottom to top in each bar; colours and words of each series. */
const SERIES: readonly { key: Outcome; label: string; group: string; color: string }[] = [
  { key: 'committed', label: 'committed', group: 'committed', color: '#1f7a4d' },
  { key: 'retryable', label: 'retryable', group: 'failed', color: '#d08a00' },
  { key: 'unknown', label: 'unknown', group: 'failed', color: '#7a4cc2' },
  { key: 'fatal', label: 'fatal', group: 'failed', color: '#b42318' },
  { key: 'offline', label: 'offline', group: 'deferred', color: '#98a2b3' },
  { key: 'auth', label: 'auth', group: 'deferred', color: '#1d5fa8' },
];

/** Drawing area in CSS pixels: as wide as the panel (measured), so text keeps its size on a phone. */
const DEFAULT_WIDTH = 960;
const HEIGHT = 180;
const LEFT = 44;
const BOTTOM = 22;
const TOP = 8;
const PLOT_H = HEIGHT - BOTTOM - TOP;
/** The least room a time label needs, in pixels. */
const LABEL_PX = 64;

/** The width of the element `ref` points at, kept current as it resizes. */
function useWidth(): [RefObject<HTMLDivElement | null>, number] {
  const ref = useRef<HTMLDivElement>(null);
  const [width, setWidth] = useState(DEFAULT_WIDTH);
  useEffect(() => {
    const element = ref.current;
    if (element === null) return;
    const measure = () => setWidth(Math.max(240, Math.floor(element.getBoundingClientRect().width)));
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(element);
    return () => observer.disconnect();
  }, []);
  return [ref, width];
}

/** The smallest "nice" number (1, 2, 5 × 10^n) at or above `value`; at least 1. */
function niceMax(value: number): number {
  if (value <= 1) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * magnitude >= value) return step * magnitude;
  return 10 * magnitude;
}

const hourLabel = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });
const dayLabel = new Intl.DateTimeFormat(undefined, { weekday: 'short', day: 'numeric' });
const fullLabel = new Intl.DateTimeFormat(undefined, { weekday: 'short', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });

const total = (bucket: Bucket) => SERIES.reduce((sum, series) => sum + bucket[series.key], 0);

export function ActivityCharts() {
  const { params } = useRoute();
  const week = params.get('activity') === '7d';
  const window = week ? ActivityWindow.Last_7Days : ActivityWindow.Last_24Hours;
  const [result, refetch] = useQuery({ query: ConsoleActivityDocument, variables: { window }, requestPolicy: 'cache-and-network' });
  const reread = useThrottle(() => refetch({ requestPolicy: 'network-only' }), 5_000);
  useOperationChanges(reread);
  // A backlog sample taken (services only) is a new point; a migration may rewrite counters.
  useStoreChanges(['BACKLOG', 'OPERATIONS'], reread);
  const [asTable, setAsTable] = useState(false);
  const { data, fetching, error } = result;

  const toggle = (
    <nav className="segmented" aria-label="Window">
      <Link to={withParams('/', { activity: undefined })} aria-current={week ? undefined : 'true'} data-window="24h">
        24 h
      </Link>
      <Link to={withParams('/', { activity: '7d' })} aria-current={week ? 'true' : undefined} data-window="7d">
        7 days
      </Link>
    </nav>
  );

  let body;
  if (data === undefined && fetching) body = <Loading what="activity" />;
  else if (data === undefined && error !== undefined) body = <ErrorState error={error} retry={() => refetch({ requestPolicy: 'network-only' })} />;
  else if (data !== undefined) {
    const activity = data.operationActivity;
    const sums = Object.fromEntries(SERIES.map((series) => [series.key, activity.buckets.reduce((sum, bucket) => sum + bucket[series.key], 0)])) as Record<Outcome, number>;
    const failed = sums.retryable + sums.unknown + sums.fatal;
    const deferred = sums.offline + sums.auth;
    body = (
      <>
        <p className="chart-summary" data-testid="activity-summary">
          {sums.committed.toLocaleString()} committed · {failed.toLocaleString()} failed ({sums.retryable} retryable, {sums.unknown} unknown, {sums.fatal} fatal) ·{' '}
          {deferred.toLocaleString()} deferred ({sums.offline} offline, {sums.auth} auth)
        </p>
        <OutcomeChart buckets={activity.buckets} week={week} />
        <ul className="legend" aria-label="Series">
          {SERIES.map((series) => (
            <li key={series.key}>
              <span className="swatch" style={{ background: series.color }} />
              {series.group === series.label ? series.label : `${series.group}: ${series.label}`}
            </li>
          ))}
        </ul>
        <h3>Due backlog over time</h3>
        {activity.backlogIncluded ? (
          <BacklogChart buckets={activity.buckets} week={week} />
        ) : (
          <p className="muted" data-testid="backlog-not-included">
            The backlog is sampled for the whole store, so it is shown to service principals only. Your due work right now is the “due now” card above.
          </p>
        )}
        <button type="button" className="link" onClick={() => setAsTable(!asTable)} aria-expanded={asTable}>
          {asTable ? 'Hide the numbers' : 'Show the numbers'}
        </button>
        {asTable && <ActivityTable buckets={activity.buckets} backlog={activity.backlogIncluded} />}
      </>
    );
  }

  return (
    <section className="panel panel-wide activity" aria-labelledby="activity-title" data-testid="activity">
      <div className="panel-head">
        <h2 id="activity-title">Outcomes over time</h2>
        {toggle}
      </div>
      {body}
    </section>
  );
}

const plotWidth = (width: number) => width - LEFT - 8;

/** x of bucket `i` of `n` and the width of each, in a chart `width` wide. */
const slot = (i: number, n: number, width: number) => ({ x: LEFT + (i * plotWidth(width)) / n, width: plotWidth(width) / n });

/** Time labels under the plot: every 3 hours over a day (6 or 12 when narrow), every day over a week (every other when narrow). */
function TimeAxis({ buckets, week, width }: { buckets: Bucket[]; week: boolean; width: number }) {
  const labels = Math.max(2, Math.floor(plotWidth(width) / LABEL_PX));
  const everyHours = [3, 6, 12].find((step) => 24 / step <= labels) ?? 12;
  const everyDays = labels >= 7 ? 1 : 2;
  return (
    <g className="axis">
      {buckets.map((bucket, i) => {
        const start = new Date(bucket.start);
        const show = week ? start.getHours() === 0 && start.getDate() % everyDays === 0 : start.getHours() % everyHours === 0;
        const { x } = slot(i, buckets.length, width);
        // A label that would run past the plot's right edge is left out.
        if (!show || x + LABEL_PX - 8 > LEFT + plotWidth(width)) return null;
        return (
          <g key={bucket.start}>
            <line x1={x} x2={x} y1={TOP + PLOT_H} y2={TOP + PLOT_H + 4} />
            <text x={x + 2} y={HEIGHT - 6}>
              {week ? dayLabel.format(start) : hourLabel.format(start)}
            </text>
          </g>
        );
      })}
    </g>
  );
}

/** Horizontal grid lines at 0, half and the top of the scale, with their values. */
function ValueAxis({ max, width }: { max: number; width: number }) {
  return (
    <g className="axis">
      {[0, max / 2, max].map((value) => {
        const y = TOP + PLOT_H - (value / max) * PLOT_H;
        return (
          <g key={value}>
            <line className="grid" x1={LEFT} x2={LEFT + plotWidth(width)} y1={y} y2={y} />
            <text x={LEFT - 6} y={y + 4} textAnchor="end" data-testid="y-label">
              {Number.isInteger(value) ? value.toLocaleString() : ''}
            </text>
          </g>
        );
      })}
    </g>
  );
}

/** One chart: an SVG as wide as its panel, its value axis up to `max`, the marks `draw` makes for that width, and the time axis. */
function ChartFrame(props: { label: string; testID: string; max: number; buckets: Bucket[]; week: boolean; draw: (width: number) => ReactNode }) {
  const [ref, width] = useWidth();
  return (
    <div ref={ref} className="chart-frame">
      <svg
        className="chart"
        width={width}
        height={HEIGHT}
        viewBox={`0 0 ${width} ${HEIGHT}`}
        role="img"
        aria-label={props.label}
        data-testid={props.testID}
        data-y-max={props.max}
        data-plot-height={PLOT_H}
      >
        <ValueAxis max={props.max} width={width} />
        {props.draw(width)}
        <TimeAxis buckets={props.buckets} week={props.week} width={width} />
      </svg>
    </div>
  );
}

function OutcomeChart({ buckets, week }: { buckets: Bucket[]; week: boolean }) {
  const max = niceMax(Math.max(0, ...buckets.map(total)));
  const draw = (width: number) =>
    buckets.map((bucket, i) => {
      const { x, width: barWidth } = slot(i, buckets.length, width);
      let y = TOP + PLOT_H;
      const start = new Date(bucket.start);
      return (
        <g key={bucket.start} data-start={bucket.start}>
          <title>
            {fullLabel.format(start)}: {SERIES.filter((s) => bucket[s.key] > 0).map((s) => `${bucket[s.key]} ${s.label}`).join(', ') || 'nothing'}
          </title>
          {/* The whole hour is the hover target, also when it is empty. */}
          <rect className="hover" x={x} y={TOP} width={barWidth} height={PLOT_H} />
          {SERIES.map((series) => {
            const count = bucket[series.key];
            if (count === 0) return null;
            const height = (count / max) * PLOT_H;
            y -= height;
            return (
              <rect
                key={series.key}
                data-testid="activity-bar"
                data-start={bucket.start}
                data-outcome={series.key}
                data-count={count}
                x={x + barWidth * 0.1}
                y={y}
                width={barWidth * 0.8}
                height={height}
                fill={series.color}
              />
            );
          })}
        </g>
      );
    });
  return <ChartFrame label={`Outcomes per hour, ${week ? 'last 7 days' : 'last 24 hours'}`} testID="outcome-chart" max={max} buckets={buckets} week={week} draw={draw} />;
}

function BacklogChart({ buckets, week }: { buckets: Bucket[]; week: boolean }) {
  const sampled = buckets.filter((bucket) => bucket.dueBacklog !== null && bucket.dueBacklog !== undefined);
  if (sampled.length === 0) return <p className="muted">No samples yet: the server counts the due backlog every few minutes (BACKLOG_SAMPLE_INTERVAL_MS).</p>;
  const max = niceMax(Math.max(0, ...sampled.map((bucket) => bucket.dueBacklog ?? 0)));
  const draw = (width: number) => {
    const point = (i: number, value: number) => {
      const { x, width: each } = slot(i, buckets.length, width);
      return { x: x + each / 2, y: TOP + PLOT_H - (value / max) * PLOT_H };
    };
    // One path per run of sampled hours: an hour without a sample is a gap, not a zero.
    let path = '';
    let open = false;
    buckets.forEach((bucket, i) => {
      if (bucket.dueBacklog === null || bucket.dueBacklog === undefined) {
        open = false;
        return;
      }
      const { x, y } = point(i, bucket.dueBacklog);
      path += `${open ? 'L' : 'M'}${x.toFixed(1)},${y.toFixed(1)}`;
      open = true;
    });
    return (
      <>
        <path className="line" d={path} />
        {buckets.map((bucket, i) => {
          if (bucket.dueBacklog === null || bucket.dueBacklog === undefined) return null;
          const { x, y } = point(i, bucket.dueBacklog);
          return (
            <circle key={bucket.start} data-testid="backlog-point" data-start={bucket.start} data-count={bucket.dueBacklog} cx={x} cy={y} r={week ? 1.8 : 3}>
              <title>
                {fullLabel.format(new Date(bucket.start))}: up to {bucket.dueBacklog}
                {bucket.dueBacklogCapped ? '+' : ''} due
              </title>
            </circle>
          );
        })}
      </>
    );
  };
  return <ChartFrame label="Largest due backlog sampled per hour" testID="backlog-chart" max={max} buckets={buckets} week={week} draw={draw} />;
}

function ActivityTable({ buckets, backlog }: { buckets: Bucket[]; backlog: boolean }) {
  return (
    <div className="table-wrap">
      <table data-testid="activity-table">
        <thead>
          <tr>
            <th>Hour</th>
            {SERIES.map((series) => (
              <th key={series.key} className="num">
                {series.label}
              </th>
            ))}
            {backlog && <th className="num">due backlog</th>}
          </tr>
        </thead>
        <tbody>
          {[...buckets].reverse().map((bucket) => (
            <tr key={bucket.start}>
              <td>{fullLabel.format(new Date(bucket.start))}</td>
              {SERIES.map((series) => (
                <td key={series.key} className="num">
                  {bucket[series.key] || <span className="muted">0</span>}
                </td>
              ))}
              {backlog && (
                <td className="num">
                  {bucket.dueBacklog ?? <span className="muted">—</span>}
                  {bucket.dueBacklogCapped ? '+' : ''}
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
