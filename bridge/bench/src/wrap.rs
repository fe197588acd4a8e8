//! `aep-bench wrap`: a recorded ACP stream piped line by line through `aep-bridge wrap acp
//! -- cat` and, interleaved in the same run, through plain `cat` (the pass-through floor).
//! Each line's round trip (written to the pipeline's stdin, read back whole from its
//! stdout) is timed; the tee's share is the difference. Every line crosses the tee twice
//! (in, and back out of `cat`), so the figure bounds a one-way line's cost from above.
//! The tee delivers to a real bridge served in this process.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use anyhow::Context as _;
use clap::Args;
use serde_json::json;

use super::{InProcess, bench_config, line, metric_sum, percentile, scrape, verdict};

/// Arguments of `aep-bench wrap`.
#[derive(Debug, Clone, Args)]
pub struct WrapArgs {
    /// Lines measured (per pipeline).
    #[arg(long, default_value_t = 5000)]
    pub n: usize,
    /// Unmeasured lines first.
    #[arg(long, default_value_t = 200)]
    pub warmup: usize,
    /// The pass-through process of both pipelines.
    #[arg(long, default_value = "cat")]
    pub cat: String,
}

/// The recorded ACP turn the stream cycles through (agent -> editor lines of one prompt
/// turn, shaped like `gemini --experimental-acp` writes them).
fn recorded(i: usize) -> String {
    let call = format!("call_{}", i / 4);
    let v = match i % 4 {
        0 => json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "bench-acp", "update": {
            "sessionUpdate": "tool_call", "toolCallId": call, "title": "Shell", "kind": "execute", "status": "pending",
            "rawInput": {"command": "ls -la src", "description": "list the sources"}}}}),
        1 => json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "bench-acp", "update": {
            "sessionUpdate": "tool_call_update", "toolCallId": call, "status": "in_progress"}}}),
        2 => json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "bench-acp", "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Looking at the listing now, "}}}}),
        _ => json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "bench-acp", "update": {
            "sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed",
            "rawOutput": {"output": "total 48\ndrwxr-xr-x 2 dev dev 4096 main.rs\n"}}}}),
    };
    format!("{v}\n")
}

struct Pipe {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    buf: Vec<u8>,
}

impl Pipe {
    fn spawn(mut cmd: Command) -> anyhow::Result<Self> {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let stdin = child.stdin.take().context("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("no stdout")?);
        Ok(Self { child, stdin, stdout, buf: Vec::new() })
    }

    /// One line's round trip in ms; errors when the line does not come back identical.
    fn round_trip(&mut self, line: &[u8]) -> anyhow::Result<f64> {
        let t = Instant::now();
        self.stdin.write_all(line)?;
        self.stdin.flush()?;
        self.buf.clear();
        self.stdout.read_until(b'\n', &mut self.buf)?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        anyhow::ensure!(self.buf == line, "the line came back changed");
        Ok(ms)
    }

    /// Closes stdin, waits, returns the stderr text.
    fn finish(self) -> anyhow::Result<String> {
        let Pipe { child, stdin, .. } = self;
        drop(stdin);
        let out = child.wait_with_output()?;
        Ok(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Runs the bench.
pub fn run(a: &WrapArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.n > 0, "--n must be at least 1");
    let bridge_bin = super::sibling_binary("aep-bridge")?;
    let scratch = super::Scratch::new("wrap")?;
    let bridge = InProcess::start(bench_config(scratch.path()), 2)?;
    let url = bridge.url();
    let result = (|| -> anyhow::Result<(Vec<f64>, Vec<f64>, String)> {
        let mut wrapped = Command::new(&bridge_bin);
        wrapped.args(["wrap", "acp", "--url", &url, "--", &a.cat]).env("AEP_WRAP_STATS", "1").env_remove("AEP_TOKEN");
        let mut tee = Pipe::spawn(wrapped)?;
        let mut plain = Pipe::spawn(Command::new(&a.cat))?;
        let (mut t, mut p) = (Vec::with_capacity(a.n), Vec::with_capacity(a.n));
        for i in 0..a.warmup + a.n {
            let l = recorded(i);
            // Alternate which goes first so neither series always sees a warm cache.
            let (x, y) = if i % 2 == 0 {
                let x = tee.round_trip(l.as_bytes())?;
                (x, plain.round_trip(l.as_bytes())?)
            } else {
                let y = plain.round_trip(l.as_bytes())?;
                (tee.round_trip(l.as_bytes())?, y)
            };
            if i >= a.warmup {
                t.push(x);
                p.push(y);
            }
        }
        let stats = tee.finish()?;
        plain.finish()?;
        Ok((t, p, stats))
    })();
    let agent = super::agent();
    let text = scrape(&agent, &url).unwrap_or_default();
    drop(agent);
    bridge.shutdown();
    let (mut t, mut p, stats) = result?;
    t.sort_by(f64::total_cmp);
    p.sort_by(f64::total_cmp);
    let admitted = metric_sum(&text, "aep_bridge_events_in_total", &["input=\"collector\""]);

    println!("bench wrap: n={} (+{} warmup) lines of a recorded ACP turn, each through the tee twice", a.n, a.warmup);
    let ms = |v: &[f64], q: f64| format!("{:.3} ms", percentile(v, q));
    let row = |label: &str, v: &[f64]| {
        line(label, &format!("p50 {}", ms(v, 50.0)), &format!("p99 {}  max {}", ms(v, 99.0), ms(v, 100.0)))
    };
    row("round trip via wrap acp -- cat", &t);
    row(&format!("baseline: {} alone", a.cat), &p);
    let (d50, d99) = (percentile(&t, 50.0) - percentile(&p, 50.0), percentile(&t, 99.0) - percentile(&p, 99.0));
    line("added by the tee", &format!("p50 +{d50:.3} ms"), &format!("p99 +{d99:.3} ms"));
    line("ratio wrap / cat", &format!("p99 {:.2}x", percentile(&t, 99.0) / percentile(&p, 99.0).max(1e-9)), "");
    line("budget p99 added < 1 ms per line", verdict(d99 < 1.0), "two tee crossings per line");
    line("tee counters", stats.trim().trim_start_matches("aep-bridge wrap: "), "");
    line("bridge admitted", &format!("{admitted} events"), "from the tee's POST /events");
    anyhow::ensure!(admitted > 0, "the tee never reached the bridge (it failed open every time)");
    Ok(())
}
