//! `tickscope demo --async`: the demo as an async service on a tokio multi-thread runtime.
//! Clients send requests; each request (a `tracing` span, measured through
//! `tickscope::tracing::Layer`) is handled by an `#[profile] async fn` that parses it (CPU
//! work), asks a database task over a channel and waits for the answer, waits on a timer,
//! and renders a reply; cache lookups have a deadline and are cancelled when they miss it.
//! Futures move between the runtime's worker threads as they wait and wake: the exit
//! summary's "spans and futures" table gives each one's busy time (its polls, where they
//! ran) beside its wall time (first poll to ready, once).

use std::hint::black_box;
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

/// A query for the database task and where its answer goes.
type Query = (u64, oneshot::Sender<u64>);

/// Runs the service for `seconds` on `threads` worker threads; returns a checksum.
pub fn run(seconds: f64, threads: usize) -> Result<u64> {
    let subscriber = tracing_subscriber::registry().with(tickscope::tracing::Layer::default());
    tracing::subscriber::set_global_default(subscriber)
        .map_err(|e| anyhow::anyhow!("cannot install the tracing subscriber: {e}"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("tokio-worker")
        .enable_time()
        .build()?;
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    rt.block_on(async move {
        let (db_tx, db_rx) = mpsc::channel::<Query>(256);
        let db = tokio::spawn(database(db_rx));
        let clients: Vec<_> = (0..threads as u64 * 4)
            .map(|c| tokio::spawn(client(c, db_tx.clone(), deadline)))
            .collect();
        drop(db_tx);
        let mut checksum = 0u64;
        for c in clients {
            checksum ^= c.await?;
        }
        db.await?;
        tracing::info!(checksum, "demo: all clients done");
        Ok(checksum)
    })
}

/// A client: requests until the deadline, one after another.
async fn client(id: u64, db: mpsc::Sender<Query>, deadline: Instant) -> u64 {
    let mut acc = 0u64;
    let mut n = 0u64;
    while n == 0 || Instant::now() < deadline {
        n += 1;
        let req = id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ n;
        let span = tracing::info_span!("request", client = id);
        acc ^= handle(req, db.clone()).instrument(span).await;
        if n % 500 == 0 {
            tracing::info!(client = id, requests = n, "client progress");
        }
    }
    acc
}

/// One request: parse (CPU), a database round trip (channel), a cache lookup with a
/// deadline (timer; cancelled when it misses it), then render (CPU, in a span of its own).
#[tickscope::profile]
async fn handle(req: u64, db: mpsc::Sender<Query>) -> u64 {
    let key = parse(req);
    let (tx, rx) = oneshot::channel();
    if db.send((key, tx)).await.is_err() {
        return 0;
    }
    let row = rx.await.unwrap_or(0);
    // A lookup that takes 0 to 4 ms against a 2 ms deadline (tokio's timers tick in
    // milliseconds): about two in five miss it and are cancelled.
    let wait = Duration::from_millis(req % 5);
    let cached = tokio::time::timeout(Duration::from_millis(2), cache_lookup(wait, key))
        .await
        .unwrap_or(0);
    let _render = tracing::info_span!("render reply").entered();
    render(row ^ cached)
}

/// Waits on a timer, as a remote cache would.
#[tickscope::profile]
async fn cache_lookup(wait: Duration, key: u64) -> u64 {
    tokio::time::sleep(wait).await;
    key.rotate_left(7)
}

/// The database: one task answering queries in turn, each some CPU work in a span.
#[tickscope::profile]
async fn database(mut rx: mpsc::Receiver<Query>) {
    while let Some((key, reply)) = rx.recv().await {
        let row = {
            let _q = tracing::info_span!("query").entered();
            let mut h = key;
            for _ in 0..200 {
                h = black_box(h.wrapping_mul(0x100_0000_01b3) ^ (h >> 29));
            }
            h
        };
        let _ = reply.send(row);
    }
}

#[tickscope::profile]
fn parse(req: u64) -> u64 {
    let text = format!("GET /item/{req} HTTP/1.1");
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

#[tickscope::profile]
fn render(v: u64) -> u64 {
    let mut s = String::with_capacity(256);
    for i in 0..16 {
        s.push_str(&format!("<td>{}</td>", v.rotate_left(i) % 10_000));
    }
    black_box(s.len() as u64 ^ v)
}
