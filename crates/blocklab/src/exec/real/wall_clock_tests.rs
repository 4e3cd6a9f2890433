//! The one discipline code under both clocks: the same trace, closed with
//! one outstanding per stream, is issued in the same order in simulated time
//! (the timed executor on a constant disk) and on the wall clock (the
//! inline issuer a stack replay uses, and the worker pool of an array's).

use std::sync::{Arc, Mutex};

use super::*;
use crate::device::toy::ToyDisk;
use crate::device::DeviceModel;
use crate::exec::discipline::{replay, vec_source, Discipline, Source};
use crate::timed::executor::{ExecConfig, TimedExecutor};
use crate::timed::replay::{run, ReplayConfig, SingleDisk, Stack};
use crate::trace::Op;

/// Request `id` of a trace (its offset says which; one 512-byte sector).
fn rq(t_ms: f64, id: u64) -> Request {
    Request {
        time: t_ms / 1000.0,
        op: Op::Read,
        offset: id * 512,
        len: 512,
        tenant: 0,
        fs: Default::default(),
    }
}

/// Two streams of 3 and 5 requests, times that say nothing of the order.
fn streams() -> Vec<Vec<Request>> {
    vec![
        vec![rq(5.0, 10), rq(1.0, 11), rq(9.0, 12)],
        vec![rq(0.0, 20), rq(0.0, 21), rq(7.0, 22), rq(3.0, 23), rq(4.0, 24)],
    ]
}

const CLOSED_1: Discipline = Discipline::Closed {
    outstanding: 1,
    think_ms: 0.0,
};

/// A timed stack that notes the requests it is given.
struct Noting<S> {
    disk: S,
    seen: Vec<u64>,
}

impl<S: Stack> Stack for Noting<S> {
    fn devices(&mut self) -> Result<Vec<Box<dyn DeviceModel>>> {
        Stack::devices(&mut self.disk)
    }
    fn sectors_per_block(&self) -> u64 {
        Stack::sectors_per_block(&self.disk)
    }
    fn issue(&mut self, req: &Request, tag: u64, ex: &mut TimedExecutor) -> Result<()> {
        self.seen.push(req.offset / 512);
        Stack::issue(&mut self.disk, req, tag, ex)
    }
}

/// A real port that notes the requests it serves.
struct NotingPort(Arc<Mutex<Vec<u64>>>);

impl Port for NotingPort {
    fn serve(&mut self, req: &Request, _buf: &mut Vec<u8>) -> bool {
        self.0.lock().unwrap().push(req.offset / 512);
        true
    }
}

fn sources() -> Vec<Source<'static>> {
    streams().into_iter().map(vec_source).collect()
}

fn timed_order(d: Discipline) -> Vec<u64> {
    let disk = SingleDisk::new(|| Ok(Box::new(ToyDisk::constant(1.0)) as Box<dyn DeviceModel>), false).unwrap();
    let mut st = Noting { disk, seen: Vec::new() };
    let cfg = ReplayConfig {
        discipline: d,
        exec: ExecConfig::default(),
    };
    run(&mut st, &mut sources(), &cfg).unwrap();
    st.seen
}

#[test]
fn closed_one_issues_in_the_same_order_on_both_clocks() {
    // Each stream's next request waits for its previous one: the streams
    // alternate, then the longer one goes on alone.
    let want = [10, 20, 11, 21, 12, 22, 23, 24];
    assert_eq!(timed_order(CLOSED_1), want);

    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut port = NotingPort(seen.clone());
    let mut served = 0;
    let mut record = |s: &Served| {
        assert!(s.ok);
        served += 1;
    };
    replay(
        &mut WallClock::inline(&mut port, &mut record),
        &mut sources(),
        &CLOSED_1,
    )
    .unwrap();
    assert_eq!(*seen.lock().unwrap(), want);
    assert_eq!(served, 8);
}

/// One stream, one outstanding: on the worker pool too (one worker per
/// request in flight) the order is the trace's, whatever the times say.
#[test]
fn closed_one_on_the_worker_pool_keeps_the_trace_order() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let ports: Vec<Box<dyn Port + Send>> = vec![Box::new(NotingPort(seen.clone()))];
    let mut served = 0;
    let mut record = |_: &Served| served += 1;
    let mut one = vec![vec_source(streams().remove(1))];
    with_pool(ports, &mut record, |clock| replay(clock, &mut one, &CLOSED_1)).unwrap();
    assert_eq!(*seen.lock().unwrap(), [20, 21, 22, 23, 24]);
    assert_eq!(served, 5);
}

/// Open at a large speed-up on the inline clock issues in due-time order,
/// as the timed executor does: streams merged by their own times (ties: the
/// wake asked for first).
#[test]
fn open_issues_in_due_order_on_both_clocks() {
    let one = vec![
        vec![rq(0.0, 1), rq(2.0, 2), rq(3.0, 3)],
        vec![rq(10.0, 4), rq(11.0, 5), rq(11.5, 6)],
    ];
    let d = Discipline::Open { speedup: 1000.0 };
    let disk = SingleDisk::new(|| Ok(Box::new(ToyDisk::constant(0.001)) as Box<dyn DeviceModel>), false).unwrap();
    let mut st = Noting { disk, seen: Vec::new() };
    let cfg = ReplayConfig {
        discipline: d.clone(),
        exec: ExecConfig::default(),
    };
    let mut srcs: Vec<Source> = one.iter().cloned().map(vec_source).collect();
    run(&mut st, &mut srcs, &cfg).unwrap();
    assert_eq!(st.seen, [1, 4, 5, 6, 2, 3]);

    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut port = NotingPort(seen.clone());
    let mut record = |_: &Served| {};
    let mut srcs: Vec<Source> = one.into_iter().map(vec_source).collect();
    replay(&mut WallClock::inline(&mut port, &mut record), &mut srcs, &d).unwrap();
    assert_eq!(*seen.lock().unwrap(), [1, 4, 5, 6, 2, 3]);
}

/// Feedback on the wall clock: two passes, only the second one recorded.
#[test]
fn feedback_runs_two_passes_and_records_the_second() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let ports: Vec<Box<dyn Port + Send>> = (0..4)
        .map(|_| Box::new(NotingPort(seen.clone())) as Box<dyn Port + Send>)
        .collect();
    let mut served = 0;
    let mut record = |_: &Served| served += 1;
    let d = Discipline::Feedback {
        cpu_speedup: Some(1000.0),
        window: 2,
    };
    with_pool(ports, &mut record, |clock| replay(clock, &mut sources(), &d)).unwrap();
    assert_eq!(seen.lock().unwrap().len(), 16);
    assert_eq!(served, 8);
}

/// A stack replayed here takes closed with a think time (served inline, one
/// at a time) and refuses feedback in one line: its first pass would warm
/// the caches the second measures.
#[test]
fn a_stack_replays_closed_with_think_time_and_refuses_feedback() {
    use crate::exec::real::replay::ReplayOptions;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    std::fs::write(
        &file,
        "tenant_map = \"ignore\"\n[[cache]]\npolicy = \"lru\"\nsize = 16\nwrite = \"back\"\n\
         [array]\nraid = \"raid5\"\ndisks = 4\nchunk = \"16KiB\"\n[device]\nmodel = \"const:1\"\n",
    )
    .unwrap();
    let d = dir.path().join("arr");
    super::super::stack::create_stack(&d, &file, Some(4 << 20), false, &[]).unwrap();
    let tr = dir.path().join("t.csv");
    std::fs::write(&tr, "0.001,W,0,4096\n0.002,R,0,4096\n0.003,R,8192,4096\n").unwrap();
    let mut o = ReplayOptions {
        traces: vec![tr.display().to_string()],
        format: "csv".into(),
        replay: "closed".into(),
        think_ms: 0.1,
        ..Default::default()
    };
    let r = super::super::stack_replay::replay_dir(&d, &o).unwrap();
    assert_eq!(r["real"]["replay"], "closed", "{r}");
    assert_eq!(r["layers"][0]["hits"].as_u64(), Some(1), "{r}");
    o.replay = "feedback".into();
    let e = super::super::stack_replay::replay_dir(&d, &o).unwrap_err().to_string();
    assert!(e.contains("feedback") && !e.contains('\n'), "{e}");
}
