//! Reader for DiskSim's parameter syntax (`.parv`, `.diskspecs`, `.model`).
//!
//! The syntax is small: top-level `TYPE NAME { ... }` blocks, `source FILE`
//! includes, `instantiate [ names ] as TYPE`, `topology ... [ ... ]`, and `#`
//! comments. Inside a block, parameters are `Name with spaces = value`
//! separated by commas; a value is a number, a word, a nested `TYPE { ... }`
//! block, a `[ ... ]` list, or `source FILE` (the single block defined in
//! that file). The result is a generic tree; the disk model reads the fields
//! it knows from it, and every missing or malformed field is reported with
//! the file, line and field name.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Location, Result};

/// One parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Num(f64),
    Str(String),
    Block(Block),
    List(Vec<Value>),
}

/// `TYPE [NAME] { params }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub type_name: String,
    pub name: Option<String>,
    pub params: Vec<Param>,
    pub file: String,
    pub line: u64,
}

/// `name = value`, with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    pub value: Value,
    pub file: String,
    pub line: u64,
}

/// `instantiate [ names ] as TYPE`.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub names: Vec<String>,
    pub type_name: String,
}

/// Everything defined by a top-level file and the files it sources.
#[derive(Debug, Clone, Default)]
pub struct ParamFile {
    pub blocks: Vec<Block>,
    pub instances: Vec<Instance>,
}

impl ParamFile {
    /// The block named `name` (the NAME of `TYPE NAME { }`).
    pub fn block(&self, name: &str) -> Option<&Block> {
        self.blocks.iter().find(|b| b.name.as_deref() == Some(name))
    }

    /// All blocks of one type, e.g. `disksim_bus`.
    pub fn blocks_of<'a>(&'a self, type_name: &'a str) -> impl Iterator<Item = &'a Block> + 'a {
        self.blocks.iter().filter(move |b| b.type_name == type_name)
    }
}

impl Block {
    pub fn get(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name.eq_ignore_ascii_case(name))
    }

    /// An error about key `key` of this block (what is not modelled, a
    /// bad value), at the key's line when it is given, else the block's.
    pub fn key_error(&self, key: &str, what: impl Into<String>) -> Error {
        let p = self.get(key);
        Error::parse(
            p.map_or(&self.file, |p| &p.file),
            Location::Line(p.map_or(self.line, |p| p.line)),
            match &self.name {
                Some(name) => format!("{} {name}: {key}", self.type_name),
                // A block in a list (a generator) has no name of its own.
                None => format!("{}: {key}", self.type_name),
            },
            what,
        )
    }

    fn missing(&self, name: &str) -> Error {
        Error::parse(
            &self.file,
            Location::Line(self.line),
            name,
            format!("missing in `{}` block", self.type_name),
        )
    }

    /// A required number.
    pub fn num(&self, name: &str) -> Result<f64> {
        match self.get(name) {
            Some(p) => p.num(),
            None => Err(self.missing(name)),
        }
    }

    /// An optional number with a default.
    pub fn num_or(&self, name: &str, default: f64) -> Result<f64> {
        match self.get(name) {
            Some(p) => p.num(),
            None => Ok(default),
        }
    }

    /// A required word (or a number written as a word).
    pub fn word(&self, name: &str) -> Result<String> {
        match self.get(name) {
            Some(Param {
                value: Value::Str(s), ..
            }) => Ok(s.clone()),
            Some(Param {
                value: Value::Num(n), ..
            }) => Ok(n.to_string()),
            Some(p) => Err(p.err("expected a word")),
            None => Err(self.missing(name)),
        }
    }

    /// A required nested block.
    pub fn block(&self, name: &str) -> Result<&Block> {
        match self.get(name) {
            Some(Param {
                value: Value::Block(b), ..
            }) => Ok(b),
            Some(p) => Err(p.err("expected a `TYPE { ... }` block")),
            None => Err(self.missing(name)),
        }
    }

    /// A required list.
    pub fn list(&self, name: &str) -> Result<&[Value]> {
        match self.get(name) {
            Some(Param {
                value: Value::List(l), ..
            }) => Ok(l),
            Some(p) => Err(p.err("expected a `[ ... ]` list")),
            None => Err(self.missing(name)),
        }
    }
}

impl Param {
    pub fn err(&self, message: impl Into<String>) -> Error {
        Error::parse(&self.file, Location::Line(self.line), &self.name, message)
    }

    pub fn num(&self) -> Result<f64> {
        match &self.value {
            Value::Num(n) => Ok(*n),
            _ => Err(self.err("expected a number")),
        }
    }

    /// A list of numbers.
    pub fn nums(&self) -> Result<Vec<f64>> {
        match &self.value {
            Value::List(l) => l
                .iter()
                .map(|v| match v {
                    Value::Num(n) => Ok(*n),
                    _ => Err(self.err("expected a list of numbers")),
                })
                .collect(),
            _ => Err(self.err("expected a `[ ... ]` list")),
        }
    }
}

// ---------------------------------------------------------------- lexing

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A run of text between punctuation, trimmed; never spans lines.
    Text(String),
    Punct(char),
}

fn lex(src: &str) -> Vec<(Tok, u64)> {
    let mut out = Vec::new();
    for (i, raw) in src.lines().enumerate() {
        let line = i as u64 + 1;
        let text = match raw.find('#') {
            Some(p) => &raw[..p],
            None => raw,
        };
        let mut cur = String::new();
        for c in text.chars() {
            if matches!(c, '{' | '}' | '[' | ']' | ',' | '=') {
                let t = cur.trim();
                if !t.is_empty() {
                    out.push((Tok::Text(t.to_string()), line));
                }
                cur.clear();
                out.push((Tok::Punct(c), line));
            } else {
                cur.push(c);
            }
        }
        let t = cur.trim();
        if !t.is_empty() {
            out.push((Tok::Text(t.to_string()), line));
        }
    }
    out
}

// ---------------------------------------------------------------- parsing

struct Parser<'a> {
    toks: Vec<(Tok, u64)>,
    pos: usize,
    file: String,
    dir: PathBuf,
    loader: &'a mut Loader,
}

/// Reads files (and caches the blocks defined by `source`d value files).
struct Loader {
    depth: usize,
    cache: HashMap<PathBuf, Block>,
}

const MAX_DEPTH: usize = 16;

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    fn line(&self) -> u64 {
        self.toks
            .get(self.pos)
            .or_else(|| self.toks.last())
            .map(|(_, l)| *l)
            .unwrap_or(1)
    }

    fn err(&self, field: &str, msg: impl Into<String>) -> Error {
        Error::parse(&self.file, Location::Line(self.line()), field, msg)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|(t, _)| t.clone());
        self.pos += 1;
        t
    }

    fn expect(&mut self, c: char, field: &str) -> Result<()> {
        match self.next() {
            Some(Tok::Punct(p)) if p == c => Ok(()),
            Some(other) => {
                self.pos -= 1;
                Err(self.err(field, format!("expected `{c}`, found {}", show(&other))))
            }
            None => Err(self.err(field, format!("expected `{c}`, found end of file"))),
        }
    }

    fn top(&mut self, out: &mut ParamFile) -> Result<()> {
        while let Some(tok) = self.next() {
            let line = self.toks[self.pos - 1].1;
            let text = match tok {
                Tok::Text(t) => t,
                Tok::Punct(c) => {
                    self.pos -= 1;
                    return Err(self.err("", format!("unexpected `{c}` at top level")));
                }
            };
            if let Some(rest) = text.strip_prefix("source ") {
                let path = self.dir.join(rest.trim());
                let sub = self.loader.parse_file(&path, Some((&self.file, line, "source")))?;
                out.blocks.extend(sub.blocks);
                out.instances.extend(sub.instances);
            } else if text == "instantiate" {
                self.expect('[', "instantiate")?;
                let names = self.words_until_bracket("instantiate")?;
                match self.next() {
                    Some(Tok::Text(t)) if t.starts_with("as ") => out.instances.push(Instance {
                        names,
                        type_name: t[3..].trim().to_string(),
                    }),
                    _ => {
                        self.pos -= 1;
                        return Err(self.err("instantiate", "expected `as TYPE` after the name list"));
                    }
                }
            } else if text.starts_with("topology") {
                // The one-disk systems used here need no topology: skip the
                // balanced bracket structure.
                self.skip_balanced("topology")?;
            } else {
                let mut words = text.split_whitespace();
                let type_name = words.next().unwrap_or_default().to_string();
                let name: Vec<&str> = words.collect();
                if name.is_empty() {
                    self.pos -= 1;
                    return Err(self.err(&text, "expected `TYPE NAME { ... }`"));
                }
                self.expect('{', &text)?;
                let params = self.params(&type_name)?;
                out.blocks.push(Block {
                    type_name,
                    name: Some(name.join(" ")),
                    params,
                    file: self.file.clone(),
                    line,
                });
            }
        }
        Ok(())
    }

    fn words_until_bracket(&mut self, field: &str) -> Result<Vec<String>> {
        let mut names = Vec::new();
        loop {
            match self.next() {
                Some(Tok::Punct(']')) => return Ok(names),
                Some(Tok::Punct(',')) => {}
                Some(Tok::Text(t)) => names.extend(expand_range(&t)),
                _ => return Err(self.err(field, "unterminated `[` list")),
            }
        }
    }

    fn skip_balanced(&mut self, field: &str) -> Result<()> {
        let mut depth = 0usize;
        loop {
            match self.next() {
                Some(Tok::Punct('[')) | Some(Tok::Punct('{')) => depth += 1,
                Some(Tok::Punct(']')) | Some(Tok::Punct('}')) => {
                    if depth == 0 {
                        return Err(self.err(field, "unbalanced bracket"));
                    }
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                Some(_) => {}
                None => return Err(self.err(field, "unterminated `[`")),
            }
        }
    }

    /// Parameters up to and including the closing `}`.
    fn params(&mut self, block_type: &str) -> Result<Vec<Param>> {
        let mut params = Vec::new();
        loop {
            match self.next() {
                Some(Tok::Punct('}')) => return Ok(params),
                Some(Tok::Punct(',')) => {}
                Some(Tok::Text(name)) => {
                    let line = self.toks[self.pos - 1].1;
                    self.expect('=', &name)?;
                    let value = self.value(&name)?;
                    params.push(Param {
                        name,
                        value,
                        file: self.file.clone(),
                        line,
                    });
                }
                Some(Tok::Punct(c)) => {
                    self.pos -= 1;
                    return Err(self.err(block_type, format!("unexpected `{c}`; expected `name = value`")));
                }
                None => return Err(self.err(block_type, "missing `}` at end of block")),
            }
        }
    }

    fn value(&mut self, field: &str) -> Result<Value> {
        match self.next() {
            Some(Tok::Punct('[')) => {
                let mut items = Vec::new();
                loop {
                    match self.peek() {
                        Some(Tok::Punct(']')) => {
                            self.pos += 1;
                            return Ok(Value::List(items));
                        }
                        Some(Tok::Punct(',')) => self.pos += 1,
                        None => return Err(self.err(field, "unterminated `[` list")),
                        _ => items.push(self.value(field)?),
                    }
                }
            }
            Some(Tok::Text(t)) => {
                if let Some(rest) = t.strip_prefix("source ") {
                    let path = self.dir.join(rest.trim());
                    let line = self.toks[self.pos - 1].1;
                    return self.loader.value_file(&path, &self.file, line, field).map(Value::Block);
                }
                if let Some(Tok::Punct('{')) = self.peek() {
                    let line = self.toks[self.pos - 1].1;
                    self.pos += 1;
                    let params = self.params(&t)?;
                    let mut words = t.split_whitespace();
                    let type_name = words.next().unwrap_or_default().to_string();
                    let name: Vec<&str> = words.collect();
                    return Ok(Value::Block(Block {
                        type_name,
                        name: if name.is_empty() { None } else { Some(name.join(" ")) },
                        params,
                        file: self.file.clone(),
                        line,
                    }));
                }
                Ok(match t.parse::<f64>() {
                    Ok(n) if n.is_finite() => Value::Num(n),
                    _ => Value::Str(t),
                })
            }
            Some(other) => {
                self.pos -= 1;
                Err(self.err(field, format!("expected a value, found {}", show(&other))))
            }
            None => Err(self.err(field, "expected a value, found end of file")),
        }
    }
}

fn show(t: &Tok) -> String {
    match t {
        Tok::Text(s) => format!("`{s}`"),
        Tok::Punct(c) => format!("`{c}`"),
    }
}

/// The names of a `[ ... ]` list of words, its `disk0 .. disk3` ranges expanded.
pub fn expand_names(items: &[String]) -> std::result::Result<Vec<String>, String> {
    Ok(items.iter().flat_map(|t| expand_range(t)).collect())
}

/// `disk0 .. disk17` → disk0, disk1, ..., disk17; other text is one name.
fn expand_range(t: &str) -> Vec<String> {
    if let Some((a, b)) = t.split_once("..") {
        let (a, b) = (a.trim(), b.trim());
        let split = |s: &str| {
            let i = s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
            (s[..i].to_string(), s[i..].parse::<u64>().ok())
        };
        if let ((pa, Some(x)), (pb, Some(y))) = (split(a), split(b)) {
            if pa == pb && x <= y {
                return (x..=y).map(|i| format!("{pa}{i}")).collect();
            }
        }
    }
    t.split_whitespace().map(str::to_string).collect()
}

impl Loader {
    fn parse_file(&mut self, path: &Path, from: Option<(&str, u64, &str)>) -> Result<ParamFile> {
        let shown = path.display().to_string();
        let src = std::fs::read_to_string(path).map_err(|e| match from {
            Some((f, l, field)) => Error::parse(f, Location::Line(l), field, format!("{shown}: {e}")),
            None => Error::io(&shown, e),
        })?;
        if self.depth >= MAX_DEPTH {
            return Err(Error::parse(
                &shown,
                Location::Whole,
                "source",
                "includes nested too deeply",
            ));
        }
        self.depth += 1;
        let mut out = ParamFile::default();
        let r = parse_str_into(&src, &shown, path.parent().unwrap_or(Path::new(".")), self, &mut out);
        self.depth -= 1;
        r.map(|_| out)
    }

    /// `Model = source x.model`: the single block that file defines.
    fn value_file(&mut self, path: &Path, file: &str, line: u64, field: &str) -> Result<Block> {
        if let Some(b) = self.cache.get(path) {
            return Ok(b.clone());
        }
        let pf = self.parse_file(path, Some((file, line, field)))?;
        match <[Block; 1]>::try_from(pf.blocks) {
            Ok([b]) => {
                self.cache.insert(path.to_path_buf(), b.clone());
                Ok(b)
            }
            Err(v) => Err(Error::parse(
                file,
                Location::Line(line),
                field,
                format!("{} defines {} blocks; expected exactly one", path.display(), v.len()),
            )),
        }
    }
}

fn parse_str_into(src: &str, file: &str, dir: &Path, loader: &mut Loader, out: &mut ParamFile) -> Result<()> {
    let mut p = Parser {
        toks: lex(src),
        pos: 0,
        file: file.to_string(),
        dir: dir.to_path_buf(),
        loader,
    };
    p.top(out)
}

/// Parse a parameter file and everything it sources (paths relative to it).
pub fn parse_file(path: &Path) -> Result<ParamFile> {
    let mut loader = Loader {
        depth: 0,
        cache: HashMap::new(),
    };
    loader.parse_file(path, None)
}

/// Parse text (named `file` in errors); `source` paths are relative to `dir`.
pub fn parse_str(src: &str, file: &str, dir: &Path) -> Result<ParamFile> {
    let mut loader = Loader {
        depth: 0,
        cache: HashMap::new(),
    };
    let mut out = ParamFile::default();
    parse_str_into(src, file, dir, &mut loader, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<ParamFile> {
        parse_str(s, "t.parv", Path::new("."))
    }

    #[test]
    fn nested_blocks_lists_and_comments() {
        let pf = parse(
            "# a comment\n\
             disksim_disk D1 {\n\
               Segment size (in blks) = 561, # trailing\n\
               Read hit over. after read = 0.066,\n\
               Scheduler = disksim_ioqueue { Scheduling policy = 1 },\n\
               Zones = [ z { First cylinder number = 0, slips = [ 3, 4 ] }, z { First cylinder number = 9 } ],\n\
               Access time type = trackSwitchPlusRotation\n\
             }\n\
             instantiate [ disk0 .. disk2 ] as D1\n\
             topology disksim_iodriver driver0 [ disksim_bus bus0 [ disksim_disk disk0 [] ] ]\n",
        )
        .unwrap();
        let b = pf.block("D1").unwrap();
        assert_eq!(b.type_name, "disksim_disk");
        assert_eq!(b.num("Segment size (in blks)").unwrap(), 561.0);
        assert_eq!(b.num("read hit over. after read").unwrap(), 0.066);
        assert_eq!(b.block("Scheduler").unwrap().num("Scheduling policy").unwrap(), 1.0);
        let zones = b.list("Zones").unwrap();
        assert_eq!(zones.len(), 2);
        match &zones[0] {
            Value::Block(z) => assert_eq!(z.get("slips").unwrap().nums().unwrap(), vec![3.0, 4.0]),
            _ => panic!("zone is a block"),
        }
        assert_eq!(b.word("Access time type").unwrap(), "trackSwitchPlusRotation");
        assert_eq!(pf.instances[0].names, vec!["disk0", "disk1", "disk2"]);
        assert_eq!(pf.instances[0].type_name, "D1");
    }

    fn expect_parse_err(src: &str, want_line: u64, want_field: &str) {
        match parse(src) {
            Err(Error::Parse {
                file, location, field, ..
            }) => {
                assert_eq!(file, "t.parv");
                assert_eq!(location, Location::Line(want_line), "src: {src}");
                assert_eq!(field, want_field, "src: {src}");
            }
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn errors_name_file_line_and_field() {
        expect_parse_err("b X {\n a = 1,\n Rotation speed 7200\n}\n", 4, "Rotation speed 7200");
        expect_parse_err("b X {\n a = ,\n}\n", 2, "a");
        expect_parse_err("b X {\n a = [ 1, 2\n", 2, "a");
        expect_parse_err("b X {\n a = 1\n", 2, "b");
        expect_parse_err("justaword {\n}\n", 1, "justaword");
    }

    #[test]
    fn missing_field_and_wrong_type_are_reported() {
        let pf = parse("b X {\n a = word,\n n = 3\n}\n").unwrap();
        let b = pf.block("X").unwrap();
        match b.num("a") {
            Err(Error::Parse { location, field, .. }) => {
                assert_eq!(location, Location::Line(2));
                assert_eq!(field, "a");
            }
            other => panic!("{other:?}"),
        }
        match b.num("absent") {
            Err(Error::Parse { field, location, .. }) => {
                assert_eq!(field, "absent");
                assert_eq!(location, Location::Line(1));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(b.num_or("absent", 2.5).unwrap(), 2.5);
    }

    #[test]
    fn missing_source_file_is_a_parse_error() {
        match parse("b X {\n Model = source nowhere.model\n}\n") {
            Err(Error::Parse { location, field, .. }) => {
                assert_eq!(location, Location::Line(2));
                assert_eq!(field, "Model");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_shipped_file_parses() {
        let Some(dir) = crate::device::validate::validation_dir() else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(&dir) else { return };
        let mut n = 0;
        for e in entries.flatten() {
            let p = e.path();
            let ext = p.extension().and_then(|s| s.to_str()).unwrap_or("");
            if matches!(ext, "parv" | "diskspecs" | "model") {
                let pf = parse_file(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                assert!(!pf.blocks.is_empty(), "{}", p.display());
                n += 1;
            }
        }
        assert!(n >= 30, "parsed {n} files");
    }
}
