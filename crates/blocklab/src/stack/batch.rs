//! Many counted stacks over the same traces, in as few passes as give each
//! stack exactly the result it gets alone: the cells of a sweep that share a
//! trace and differ only in keys.
//!
//! `run::run_count` feeds several stacks from one pass, but the stacks share
//! the pre-pass (`address::survey`): a stack that needs no footprint would
//! report the footprint another one needed (`unique_blocks`). Stacks are
//! therefore grouped by what they do to the trace and what their pre-pass
//! measures; each group is one `run_count`. An error aborts a group's pass,
//! so its stacks are then run one by one, each with its own result or error.

use super::address::SurveyNeeds;
use super::build::survey_needs;
use super::result::StackResult;
use super::run::{run_count, TraceInput};
use super::spec::{StackSpec, TenantMap};
use crate::error::Result;

/// What must be equal for stacks to share a pass without changing their results:
/// what they do to the trace, and every measure of the pre-pass. (Only the
/// footprint shows in a result, `unique_blocks`; the other measures are read
/// only by the stacks that ask for them, but are kept apart too: a new
/// measure need not be checked for that.)
#[derive(Debug, Clone, PartialEq, Eq)]
struct PassKey {
    reads_only: bool,
    tenant_map: TenantMap,
    /// `[[tenant]]`'s volumes (blocks): they replace the measured extents.
    declared: Option<Vec<u64>>,
    block_size: u64,
    unique: bool,
    tenants: bool,
    next_use: Option<bool>,
    span: bool,
    extents: bool,
    /// `replay.sort` and its window's bits: the trace is read in one order.
    sort: Option<u64>,
}

fn pass_key(s: &StackSpec) -> PassKey {
    // Every field, named: a new measure of the survey must be added here (or this stops compiling).
    let SurveyNeeds {
        unique,
        tenants,
        next_use,
        span,
        extents,
    } = survey_needs(s);
    PassKey {
        reads_only: s.replay.reads_only,
        tenant_map: s.tenant_map,
        // (A spec that parsed has valid volumes; a bad one fails in its own run.)
        declared: s.tenant_volumes().ok().flatten(),
        block_size: s.block_size(),
        unique,
        tenants,
        next_use,
        span,
        extents,
        sort: s.replay.sort.then(|| s.replay.sort_window.to_bits()),
    }
}

/// The groups of `specs` (indices, in order) that may share a pass.
pub fn groups(specs: &[StackSpec]) -> Vec<Vec<usize>> {
    let mut keys: Vec<PassKey> = Vec::new();
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let k = pass_key(s);
        match keys.iter().position(|x| *x == k) {
            Some(g) => out[g].push(i),
            None => {
                keys.push(k);
                out.push(vec![i]);
            }
        }
    }
    out
}

/// Counted results of every stack over `traces`, in the order of `specs`:
/// each the result (or the error) the stack gets when run alone.
pub fn run_count_each(specs: &[StackSpec], traces: &[TraceInput]) -> Vec<Result<StackResult>> {
    let mut out: Vec<Option<Result<StackResult>>> = specs.iter().map(|_| None).collect();
    for g in groups(specs) {
        let members: Vec<StackSpec> = g.iter().map(|&i| specs[i].clone()).collect();
        match run_count(&members, traces) {
            Ok(results) => {
                for (&i, r) in g.iter().zip(results) {
                    out[i] = Some(Ok(r));
                }
            }
            Err(_) if g.len() > 1 => {
                for (&i, s) in g.iter().zip(&members) {
                    out[i] = Some(run_count(std::slice::from_ref(s), traces).map(|mut v| v.remove(0)));
                }
            }
            Err(e) => out[g[0]] = Some(Err(e)),
        }
    }
    out.into_iter()
        .map(|r| r.expect("every stack belongs to a group"))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::path::PathBuf;

    use super::*;
    use crate::stack::run::run;
    use crate::stack::test_util::parse_spec;
    use crate::stack::Executor;

    fn spec(text: &str, sets: &[&str]) -> StackSpec {
        parse_spec(text, sets, "t.toml", PathBuf::new()).unwrap()
    }

    const BASE: &str = "tenant_map = \"key\"\n[replay]\nreads_only = true\n[[cache]]\npolicy = \"lru\"\nsize = 50\n\
                        merge_misses = false\n[array]\nraid = 5\ndisks = 5\nfailed = [0]\n[device]\nmodel = \"const:0\"\n";

    /// A seeded trace with reuse, reads and writes, two tenants, some multi-block requests.
    fn trace() -> tempfile::NamedTempFile {
        let mut f = tempfile::Builder::new().suffix(".csv").tempfile().unwrap();
        writeln!(f, "timestamp,op,offset,size,tenant").unwrap();
        let mut x: u64 = 12345;
        for i in 0..4000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let block = if x % 3 == 0 { x % 97 } else { x % 1500 };
            let op = if x % 5 == 0 { "W" } else { "R" };
            let len = 4096 * (1 + (x >> 20) % 3);
            writeln!(f, "{}.0,{op},{},{len},{}", i, block * 4096, (x >> 30) % 2).unwrap();
        }
        f.flush().unwrap();
        f
    }

    #[test]
    fn each_result_is_the_result_of_the_stack_alone() {
        let t = trace();
        let traces = [TraceInput::new(t.path().to_string_lossy(), "csv")];
        let variants: Vec<Vec<&str>> = vec![
            vec![],
            vec!["cache.0.policy=vdf-lru"],
            vec!["cache.0.policy=lfu", "cache.0.size=10%"],
            vec!["cache.0.policy=vdf-lfu", "cache.0.size=10%"],
            vec!["cache.0.policy=opt", "cache.0.size=200"],
            vec!["array.disks=7", "cache.0.size=2%"],
            vec!["replay.reads_only=false", "cache.0.write=through"],
            vec![
                "replay.reads_only=false",
                "cache.0.policy=arc",
                "cache.1.policy=lru",
                "cache.1.size=300",
            ],
            vec!["tenant_map=concat", "cache.0.policy=sieve"],
            vec!["array.raid=6", "array.disks=6", "array.failed=[1, 2]"],
            vec!["array.fail_at=\"1000req\"", "cache.0.policy=vdf-lru"],
            vec!["array.fit=scale", "array.disk_size=\"8MiB\""],
            vec!["array.fit=scale", "array.disk_size=\"8MiB\"", "cache.0.size=5%"],
            vec!["tier.size=300", "tier.partitioner=static", "tier.model=\"const:0.1\""],
            vec!["tier.size=300", "tier.partitioner=global", "tier.model=\"const:0.1\""],
        ];
        let specs: Vec<StackSpec> = variants.iter().map(|v| spec(BASE, v)).collect();
        assert!(groups(&specs).len() > 3, "the variants span several pass groups");
        let each = run_count_each(&specs, &traces);
        for (s, r) in specs.iter().zip(each) {
            let alone = run(s, &traces, Executor::Count).unwrap();
            assert_eq!(r.unwrap().to_json(), alone.to_json());
        }
    }

    #[test]
    fn declared_tenants_get_a_pass_of_their_own() {
        let t = trace();
        let traces = [TraceInput::new(t.path().to_string_lossy(), "csv")];
        let measured = spec(BASE, &["tenant_map=concat"]);
        let declared = spec(
            &format!("{BASE}[[tenant]]\nname = \"a\"\nsize = \"8MiB\"\n[[tenant]]\nname = \"b\"\nsize = \"8MiB\"\n"),
            &["tenant_map=concat"],
        );
        let specs = vec![measured, declared];
        assert_eq!(groups(&specs).len(), 2, "[[tenant]] changes the layout: not one pass");
        let each = run_count_each(&specs, &traces);
        let mut out = Vec::new();
        for (s, r) in specs.iter().zip(each) {
            let alone = run(s, &traces, Executor::Count).unwrap();
            assert_eq!(r.as_ref().unwrap().to_json(), alone.to_json());
            out.push(alone);
        }
        assert_ne!(
            out[0].devices, out[1].devices,
            "tenant 1 placed after 8 MiB, not after its measured extent"
        );
        assert!(run_count(&specs, &traces)
            .unwrap_err()
            .to_string()
            .contains("[[tenant]]"));
    }

    #[test]
    fn a_failing_stack_fails_alone_and_the_others_still_run() {
        let t = trace();
        let traces = [TraceInput::new(t.path().to_string_lossy(), "csv")];
        // A share of the footprint below one block: an error once the pre-pass has counted it.
        let bad = spec(BASE, &["cache.0.size=0.001%"]);
        let alone_err = run(&bad, &traces, Executor::Count).unwrap_err();
        let specs = vec![spec(BASE, &["cache.0.size=5%"]), bad, spec(BASE, &["cache.0.size=9%"])];
        assert_eq!(groups(&specs).len(), 1, "the three share a pass");
        let each = run_count_each(&specs, &traces);
        assert_eq!(each[1].as_ref().unwrap_err().to_string(), alone_err.to_string());
        assert!(alone_err.to_string().contains("cache.0.size"), "{alone_err}");
        for i in [0, 2] {
            let alone = run(&specs[i], &traces, Executor::Count).unwrap();
            assert_eq!(each[i].as_ref().unwrap().to_json(), alone.to_json());
        }
    }
}
