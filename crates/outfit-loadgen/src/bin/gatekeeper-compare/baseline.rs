//! The Go side: `gatekeeper-baseline serve` (hack/gatekeeper-baseline) as a child process, one
//! JSON request per line on its stdin, one JSON response per line on its stdout.

use std::{
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::timing::Timing;

pub(crate) struct Baseline {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// What a `load` answered.
pub(crate) struct Loaded {
    pub(crate) mutators: u64,
    pub(crate) load: Duration,
    pub(crate) conflicts: Vec<String>,
}

/// What `mutate` answered: the admitted object and whether Gatekeeper said it mutated, or
/// Gatekeeper's error.
pub(crate) type Mutated = std::result::Result<(Value, bool), String>;

fn nanos(value: &Value) -> Duration {
    Duration::from_secs_f64(value.as_f64().unwrap_or(f64::NAN).max(0.0) / 1e9)
}

/// How many calls to time, and for how long.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    pub(crate) min_iters: u64,
    pub(crate) max_iters: u64,
    pub(crate) time: Duration,
    pub(crate) batch: u64,
}

impl Baseline {
    /// Starts `binary serve` with `GOMAXPROCS=go_maxprocs` (0 leaves Go's default).
    pub(crate) fn start(binary: &Path, go_maxprocs: usize) -> Result<Self> {
        let mut command = Command::new(binary);
        command
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if go_maxprocs > 0 {
            command.env("GOMAXPROCS", go_maxprocs.to_string());
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("starting {} serve", binary.display()))?;
        let stdin = child.stdin.take().context("child stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("child stdout")?);
        Ok(Self { child, stdin, stdout })
    }

    fn call(&mut self, request: &Value) -> Result<Value> {
        let mut line = serde_json::to_vec(request)?;
        line.push(b'\n');
        self.stdin
            .write_all(&line)
            .and_then(|()| self.stdin.flush())
            .context("writing to gatekeeper-baseline")?;
        let mut response = String::new();
        if self.stdout.read_line(&mut response)? == 0 {
            bail!("gatekeeper-baseline exited (see its stderr above)");
        }
        serde_json::from_str(&response).context("reading gatekeeper-baseline's response")
    }

    fn ok(response: Value) -> std::result::Result<Value, String> {
        if response["ok"] == json!(true) {
            Ok(response)
        } else {
            Err(response["error"]
                .as_str()
                .unwrap_or("no error message")
                .to_owned())
        }
    }

    /// Replaces the loaded mutators with those in `yaml`.
    pub(crate) fn load(&mut self, yaml: &str) -> Result<Loaded> {
        let response = Self::ok(self.call(&json!({"op": "load", "yaml": yaml}))?)
            .map_err(|e| anyhow::anyhow!("Gatekeeper rejected the mutators: {e}"))?;
        Ok(Loaded {
            mutators: response["mutators"].as_u64().unwrap_or(0),
            load: Duration::from_secs_f64(response["load_ms"].as_f64().unwrap_or(0.0) / 1e3),
            conflicts: response["conflicts"]
                .as_array()
                .map(|c| c.iter().filter_map(|id| id.as_str().map(str::to_owned)).collect())
                .unwrap_or_default(),
        })
    }

    /// One System.Mutate, as the webhook would run it for a CREATE in `namespace`, and its
    /// timing (that call alone: no decoding, no copy).
    pub(crate) fn mutate(&mut self, object: &Value, namespace: &str) -> Result<(Mutated, Option<Timing>)> {
        let response = self.call(&json!({"op": "mutate", "object": object, "namespace": namespace}))?;
        Ok(match Self::ok(response) {
            Ok(mut r) => {
                let timing = Timing {
                    iters: 1,
                    per_iter: nanos(&r["mutate_ns"]),
                    cpu: nanos(&r["cpu_ns"]),
                    copy: None,
                };
                (
                    Ok((r["object"].take(), r["mutated"] == json!(true))),
                    Some(timing),
                )
            }
            Err(e) => (Err(e), None),
        })
    }

    /// Times System.Mutate (the input's deep copies made outside the clock).
    pub(crate) fn bench(&mut self, object: &Value, namespace: &str, budget: Budget) -> Result<Timing> {
        let response = self.call(&json!({
            "op": "bench",
            "object": object,
            "namespace": namespace,
            "min_iters": budget.min_iters,
            "max_iters": budget.max_iters,
            "budget_ms": budget.time.as_secs_f64() * 1e3,
            "batch": budget.batch,
        }))?;
        let response = Self::ok(response).map_err(|e| anyhow::anyhow!("Gatekeeper failed: {e}"))?;
        Ok(Timing {
            iters: response["iters"].as_u64().unwrap_or(0),
            per_iter: nanos(&response["mutate_ns"]),
            cpu: nanos(&response["cpu_ns"]),
            copy: Some(nanos(&response["copy_ns"])),
        })
    }
}

impl Drop for Baseline {
    fn drop(&mut self) {
        // Closing stdin ends `serve`; wait so no zombie is left behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
