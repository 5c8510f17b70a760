// graphile.mjs: graphile-worker under berth-bench's load shape, for
// bench/compare's PostgreSQL row. Prints one row in berth-bench's columns.
//
//   node bench/graphile.mjs --url postgres://... [--count N]
//        [--connections N] [--concurrency N] [--rate R] [--label TEXT]
//        [--tsv] [--no-header]
//
// graphile-worker itself is not part of berth: bench/compare installs the
// npm package into a scratch folder and runs this file with NODE_PATH
// pointing there.
//
// The shape is the e2e scenario's: --connections producer connections
// (default 8), each calling graphile_worker.add_job and awaiting its answer
// before the next (one round trip per job); a runner with --concurrency
// (default 24) runs the no-op task in a process of its own, as berthd runs
// apart from berth-bench; the run is timed from the first submission to
// the last completion. With --rate the producers offer R jobs/s in all,
// open loop, each job timed from when it was due (the latency rows).
// Latency is submitted to completed: the runner reports each job's end
// over IPC with the wall clock, which both processes share.
import { fork } from "node:child_process";
import { performance } from "node:perf_hooks";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

function now() {
	return performance.timeOrigin + performance.now();
}

function parseArgs(argv) {
	const o = {
		url: null,
		count: 20000,
		connections: 8,
		concurrency: 24,
		rate: 0,
		label: "-",
		tsv: false,
		header: true,
		role: "bench",
		duration: 60,
	};
	for (let i = 2; i < argv.length; i++) {
		const a = argv[i];
		const next = () => {
			if (i + 1 >= argv.length)
				throw new Error(`${a} needs a value`);
			return argv[++i];
		};
		switch (a) {
		case "--url": o.url = next(); break;
		case "--count": o.count = Number(next()); break;
		case "--connections": o.connections = Number(next()); break;
		case "--concurrency": o.concurrency = Number(next()); break;
		case "--rate": o.rate = Number(next()); break;
		case "--duration": o.duration = Number(next()); break;
		case "--label": o.label = next(); break;
		case "--tsv": o.tsv = true; break;
		case "--no-header": o.header = false; break;
		case "--role": o.role = next(); break;
		default: throw new Error(`unknown option ${a}`);
		}
	}
	if (!o.url)
		throw new Error("--url is required");
	for (const k of ["count", "connections", "concurrency"])
		if (!Number.isInteger(o[k]) || o[k] < 1)
			throw new Error(`--${k} takes a positive integer, not ${o[k]}`);
	if (!Number.isFinite(o.rate) || o.rate < 0)
		throw new Error(`--rate takes a number of jobs/s >= 0, not ${o.rate}`);
	if (!Number.isFinite(o.duration) || o.duration <= 0)
		throw new Error(`--duration takes a number of seconds > 0, not ${o.duration}`);
	return o;
}

// ---- the runner (a child process) -----------------------------------------

async function runner(o) {
	const { run } = require("graphile-worker");
	let pending = [];
	const flush = () => {
		if (pending.length > 0) {
			process.send({ done: pending });
			pending = [];
		}
	};
	const timer = setInterval(flush, 20);
	const r = await run({
		connectionString: o.url,
		concurrency: o.concurrency,
		maxPoolSize: o.concurrency + 2,
		noHandleSignals: true,
		pollInterval: 1000,
		logger: new (require("graphile-worker").Logger)(() => () => {}),
		taskList: { noop: async () => {} },
	});
	r.events.on("job:success", ({ job }) => {
		pending.push([String(job.id), now()]);
	});
	// The benchmark gone (killed, or failed), the runner goes too rather
	// than hold the database's connections.
	process.on("disconnect", () => process.exit(1));
	process.on("message", async (m) => {
		if (m === "stop") {
			flush();
			clearInterval(timer);
			await r.stop();
			process.exit(0);
		}
	});
	process.send({ ready: true });
}

// ---- the benchmark -------------------------------------------------------------

function pct(sorted, p) {
	if (sorted.length === 0)
		return NaN;
	const i = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
	return sorted[Math.max(0, i)];
}

function ms(v) {
	if (!Number.isFinite(v))
		return "-";
	return v < 10 ? v.toFixed(3) : v.toFixed(1);
}

async function bench(o) {
	const pg = require("pg");
	// The schema first, so that the runner and the producers do not race
	// to install it.
	const { runMigrations } = require("graphile-worker");
	await runMigrations({ connectionString: o.url, logger: new (require("graphile-worker").Logger)(() => () => {}) });

	const child = fork(new URL(import.meta.url).pathname,
		["--role", "runner", "--url", o.url, "--concurrency", String(o.concurrency)],
		{ stdio: ["ignore", "inherit", "inherit", "ipc"] });
	const done = new Map();
	let ready, failed;
	const readyP = new Promise((res, rej) => { ready = res; failed = rej; });
	let wake = null;
	let exited = null;
	child.on("exit", (code, signal) => {
		exited = signal ? `signal ${signal}` : `status ${code}`;
		failed(new Error(`the graphile-worker runner ended (${exited}) before it was ready`));
		if (wake)
			wake();
	});
	child.on("message", (m) => {
		if (m.ready)
			ready();
		if (m.done) {
			for (const [id, t] of m.done)
				done.set(id, t);
			if (wake)
				wake();
		}
	});
	await readyP;

	const pool = new pg.Pool({ connectionString: o.url, max: o.connections });
	const clients = [];
	for (let i = 0; i < o.connections; i++)
		clients.push(await pool.connect());
	for (const c of clients)
		await c.query("SELECT 1");

	const jobs = []; // [id, sent, acked]
	const cpu0 = process.cpuUsage();
	const t0 = now();
	const deadline = t0 + o.duration * 1000;
	let next = 0;
	const sql = "SELECT (graphile_worker.add_job('noop', '{}'::json)).id";
	async function producer(c) {
		for (;;) {
			const k = next++;
			if (k >= o.count || now() > deadline)
				return;
			let sent;
			if (o.rate > 0) {
				sent = t0 + (k * 1000) / o.rate;
				const wait = sent - now();
				if (wait > 0)
					await new Promise((res) => setTimeout(res, wait));
			} else {
				sent = now();
			}
			const res = await c.query(sql);
			jobs.push([String(res.rows[0].id), sent, now()]);
		}
	}
	await Promise.all(clients.map(producer));
	// Every job acknowledged: wait for the last completion.
	while (done.size < jobs.length && now() < deadline + 30000 && !exited)
		await new Promise((res) => { wake = res; setTimeout(res, 100); });
	const cpu = process.cpuUsage(cpu0);
	if (exited)
		throw new Error(`the graphile-worker runner ended (${exited}) with ${jobs.length - done.size} jobs not completed`);
	const gone = new Promise((res) => child.on("exit", res));
	child.send("stop");
	await gone;
	for (const c of clients)
		c.release();
	await pool.end();

	const acks = [], dones = [];
	let last = t0, n = 0;
	for (const [id, sent, acked] of jobs) {
		acks.push(acked - sent);
		const d = done.get(id);
		if (d === undefined)
			continue;
		n++;
		dones.push(d - sent);
		if (d > last)
			last = d;
	}
	acks.sort((a, b) => a - b);
	dones.sort((a, b) => a - b);
	const secs = (last - t0) / 1000;
	const cells = [
		"graphile", o.label, o.rate > 0 ? "latency" : "e2e",
		String(o.connections), "1", o.rate > 0 ? String(o.rate) : "-",
		String(n), String(jobs.length - n), secs.toFixed(2),
		secs > 0 ? (n / secs).toFixed(0) : "0",
		ms(pct(acks, 50)), ms(pct(acks, 99)), ms(pct(acks, 99.9)),
		ms(pct(dones, 50)), ms(pct(dones, 99)), ms(pct(dones, 99.9)),
		ms(dones.length ? dones[dones.length - 1] : NaN),
		secs > 0 ? ((100 * (cpu.user + cpu.system)) / 1e6 / secs).toFixed(0) : "0",
	];
	const cols = ["target", "mode", "scenario", "conns", "inflight",
		"offered/s", "jobs", "failed", "seconds", "jobs/s", "ack_p50",
		"ack_p99", "ack_p99.9", "done_p50", "done_p99", "done_p99.9",
		"done_max", "gen_cpu%"];
	const sep = o.tsv ? "\t" : " ";
	if (o.header)
		console.log(cols.join(sep));
	console.log(cells.join(sep));
}

let o;
try {
	o = parseArgs(process.argv);
} catch (e) {
	console.error(`graphile.mjs: ${e.message}`);
	process.exit(2);
}
try {
	if (o.role === "runner")
		await runner(o);
	else
		await bench(o);
} catch (e) {
	console.error(`graphile.mjs${o.role === "runner" ? " (runner)" : ""}: ${e.message}`);
	process.exit(1);
}
