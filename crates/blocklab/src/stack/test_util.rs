//! Test helpers shared by the stack's test modules: parse a spec with `--set`
//! overrides, run requests through a built stack in the counting executor or
//! replay them timed.

use std::path::PathBuf;

use super::address::Survey;
use super::build::{build, Executor};
use super::result::StackResult;
use super::spec::{Origin, StackSpec};
use crate::timed::executor::ExecConfig;
use crate::timed::replay::{run, vec_source, Discipline, ReplayConfig};
use crate::trace::Request;

/// `text` with the `key=value` overrides `sets`, errors naming `file`.
pub(crate) fn parse_spec(text: &str, sets: &[&str], file: &str, dir: PathBuf) -> crate::error::Result<StackSpec> {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    StackSpec::from_str_with(text, &sets, Origin { file: file.into(), dir })
}

/// `reqs` through the stack of `s` in the counting executor.
pub(crate) fn counted(s: &StackSpec, reqs: &[Request], survey: Option<&Survey>) -> StackResult {
    let mut st = build(s, Executor::Count, survey).unwrap();
    for r in reqs {
        st.count_request(r).unwrap();
    }
    st.count_finish().unwrap();
    let mut out = st.result("count");
    out.finish();
    out
}

/// `reqs` replayed through the stack of `s` in the timed executor under `discipline`.
pub(crate) fn timed(s: &StackSpec, reqs: &[Request], survey: Option<&Survey>, discipline: Discipline) -> StackResult {
    let mut st = build(s, Executor::Timed, survey).unwrap();
    let cfg = ReplayConfig {
        discipline,
        exec: ExecConfig::default(),
    };
    let rep = run(&mut st, &mut [vec_source(reqs.to_vec())], &cfg).unwrap();
    let mut out = st.result("timed");
    out.add_timed(&rep);
    out.finish();
    out
}
