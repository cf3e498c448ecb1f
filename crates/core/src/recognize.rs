//! Recognising a split regex by its meaning: which hand-written scanner (`crate::scan`) splits as
//! a regex spelled otherwise than the scanner's own.
//!
//! A regex is parsed (fancy-regex's parser) into a normal form in which spellings of the same
//! meaning coincide, and compared with the normal form of each scanner's regex in the same engine:
//! - character classes are sets of code points (`[^\s\p{L}\p{N}\r\n]` is `[^\s\p{L}\p{N}]`; a
//!   case-insensitive letter is the set it matches), groups are dropped, `X{1}` is `X`;
//! - a run of alternatives that match a finite, prefix-free set of strings is that set (so
//!   `(?i:'s|'t|'re|'ve|'m|'ll|'d)` is `'(?i:[sdmt]|ll|ve|re)`: with no string a prefix of
//!   another, at most one matches at a place, whatever the order);
//! - an atomic group (a possessive quantifier) is dropped where the regex could not backtrack into
//!   it anyway: when what follows it in its alternative always succeeds (`\p{L}++` at the end,
//!   `[^\s\p{L}\p{N}]++[\r\n]*`), when it is an optional character that the next item cannot start
//!   with (`[^\r\n\p{L}\p{N}]?+\p{L}`), and when it is a run before the end of the text (`\s++\z`);
//! - `C*D+` ending an alternative, with `D` inside `C`, is `C*D` (`\s*[\r\n]+` is `\s*[\r\n]`: the
//!   greedy `C*` gives back up to the last `D` of the run, and no `D` follows it);
//! - a last alternative `C+` after `C+(?!¬C)` is `C` (it is only reached for a run of one `C`
//!   before a character outside `C`).
//!
//! Equal normal forms are a strong hint, not the proof: a recognised regex is used only once the
//! load-time probe finds the scanner's pieces identical to the engine's
//! (`conversion/_hf_pretokenizers.py`), and each scanner is proven identical to its own regex in
//! each engine (`tests/scan_identity.rs`).
//!
//! Oniguruma (`tokenizers`' engine) reads some syntax otherwise than fancy-regex (`X{1,3}+` is
//! `(?:X{1,3})+` there, `$` is the end of a line, `\h` a hex digit...), so a regex for Oniguruma is
//! first checked to use only constructs that mean the same in both ([`oniguruma_safe`]); the
//! character classes it may use are compared in both engines on every code point by a test.

use std::collections::BTreeSet;

use fancy_regex::{Assertion, AstNode, Expr, LookAround};
use regex_syntax::hir::{Class, ClassUnicode, HirKind};

use crate::pretokenize::{Behavior, SplitRule, SplitStep, MAX_PATTERN_BYTES};
use crate::scan::{Scanner, Semantics};

/// The scanner that splits as `rule` does, and the rule spelled as that scanner's regex (which
/// [`crate::pretokenize::Splitter::new`] runs on the scanner): a tiktoken pattern, or one Split step
/// keeping every piece. `None` when no scanner's regex has the same normal form, and without
/// parsing it for a regex over [`MAX_PATTERN_BYTES`], which the splitter refuses anyway.
pub fn recognize(rule: &SplitRule) -> Option<(Scanner, SplitRule)> {
    let too_long = |regex: &str| regex.len() > MAX_PATTERN_BYTES;
    match rule {
        SplitRule::Pattern(pattern) if too_long(pattern) => None,
        SplitRule::Steps(steps) if steps.iter().any(|step| too_long(&step.pattern)) => None,
        SplitRule::ByteLevel(_) => None,
        SplitRule::Pattern(pattern) => {
            let form = normal_form(pattern, Semantics::FancyRegex)?;
            let scanner = scanner_with_form(&form, Semantics::FancyRegex)?;
            Some((scanner, SplitRule::Pattern(scanner.regex(Semantics::FancyRegex).to_owned())))
        }
        SplitRule::Steps(steps) => {
            let [step] = steps.as_slice() else { return None };
            let keeps_matches =
                matches!((step.behavior, step.invert), (Behavior::Isolated, false) | (Behavior::Removed, true));
            if step.literal || !keeps_matches {
                return None;
            }
            let form = normal_form(&step.pattern, Semantics::Oniguruma)?;
            let scanner = scanner_with_form(&form, Semantics::Oniguruma)?;
            let canonical = SplitStep::regex(scanner.regex(Semantics::Oniguruma), step.behavior, step.invert);
            Some((scanner, SplitRule::Steps(vec![canonical])))
        }
    }
}

fn scanner_with_form(form: &Node, semantics: Semantics) -> Option<Scanner> {
    Scanner::ALL
        .into_iter()
        .find(|scanner| normal_form(scanner.regex(semantics), semantics).as_ref() == Some(form))
}

/// A regex in normal form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// One character of a set (sorted, merged ranges).
    Class(Vec<(u32, u32)>),
    /// A finite set of strings, none a prefix of another.
    Strings(BTreeSet<String>),
    Concat(Vec<Node>),
    /// Alternatives in the order they are tried.
    Alt(Vec<Node>),
    Repeat { child: Box<Node>, lo: usize, hi: usize, greedy: bool },
    Atomic(Box<Node>),
    LookAround(Box<Node>, LookKind),
    EndText,
    Empty,
}

/// [`fancy_regex::LookAround`], comparable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookKind {
    Ahead,
    AheadNeg,
    Behind,
    BehindNeg,
}

/// The normal form of `regex` as `semantics` reads it, or `None` when it uses a construct this
/// module does not normalise (or, for Oniguruma, one whose meaning differs between the engines).
pub fn normal_form(regex: &str, semantics: Semantics) -> Option<Node> {
    if semantics == Semantics::Oniguruma && !oniguruma_safe(regex) {
        return None;
    }
    let tree = Expr::parse_tree(regex).ok()?;
    let node = convert(&tree.expr, semantics)?;
    Some(top_level(node))
}

/// Property names whose classes Oniguruma and regex-syntax (fancy-regex's classes) agree on, code
/// point by code point (a test checks each).
pub const SAFE_PROPERTIES: &[&str] = &["L", "N", "M", "P", "S", "Lu", "Ll", "Lt", "Lm", "Lo", "Han"];

/// Letters whose case-insensitive class Oniguruma and regex-syntax agree on (a test checks each):
/// those of the contractions.
pub const SAFE_CASELESS: &str = "'sdmtlvreSDMTLVRE";

/// Whether `regex` uses only constructs that Oniguruma and fancy-regex read alike: literal
/// characters, the escapes `\s \S \r \n \t \z`, escaped punctuation, `\p{..}`/`\P{..}` of
/// [`SAFE_PROPERTIES`], bracket classes of those (no nesting, POSIX classes or intersections),
/// groups `( (?: (?> (?= (?!`, the flag `i` on [`SAFE_CASELESS`] letters only, and greedy or
/// possessive `? * +`, greedy `{n}`, `{n,}`, `{n,m}` (Oniguruma reads `{n,m}+` as a repetition).
pub fn oniguruma_safe(regex: &str) -> bool {
    let chars: Vec<char> = regex.chars().collect();
    let mut at = 0;
    let mut in_class = false;
    // Whether each open group is case-insensitive, and whether the text at `at` is.
    let mut caseless_stack: Vec<bool> = Vec::new();
    let mut caseless = false;
    while at < chars.len() {
        let c = chars[at];
        match c {
            '\\' => {
                let Some(&kind) = chars.get(at + 1) else { return false };
                match kind {
                    'p' | 'P' => {
                        if chars.get(at + 2) != Some(&'{') {
                            return false;
                        }
                        let Some(close) = chars[at + 3..].iter().position(|&c| c == '}') else { return false };
                        let name: String = chars[at + 3..at + 3 + close].iter().collect();
                        if !SAFE_PROPERTIES.contains(&name.as_str()) {
                            return false;
                        }
                        at += 4 + close;
                        continue;
                    }
                    's' | 'S' | 'r' | 'n' | 't' => {}
                    'z' if !in_class => {}
                    _ if kind.is_ascii_punctuation() => {}
                    _ => return false,
                }
                at += 2;
                continue;
            }
            '[' if in_class => return false,
            '[' => {
                in_class = true;
                if chars.get(at + 1) == Some(&'^') {
                    at += 1;
                }
                if chars.get(at + 1) == Some(&']') {
                    return false; // a leading `]`: read differently
                }
            }
            ']' if in_class => in_class = false,
            '&' if in_class && chars.get(at + 1) == Some(&'&') => return false,
            _ if in_class => {
                if caseless && !SAFE_CASELESS.contains(c) && c.is_alphabetic() {
                    return false;
                }
            }
            '(' => {
                caseless_stack.push(caseless);
                match chars.get(at + 1) {
                    Some('?') => match chars.get(at + 2) {
                        Some(':' | '>' | '=' | '!') => at += 2,
                        Some('i') if chars.get(at + 3) == Some(&':') => {
                            caseless = true;
                            at += 3;
                        }
                        _ => return false,
                    },
                    Some('*') => return false,
                    _ => {}
                }
            }
            ')' => match caseless_stack.pop() {
                Some(outer) => caseless = outer,
                None => return false,
            },
            '|' => {}
            '?' | '*' | '+' => {
                // A quantifier, possibly possessive (`?+ *+ ++`); never lazy.
                if chars.get(at + 1) == Some(&'?') {
                    return false;
                }
                if chars.get(at + 1) == Some(&'+') {
                    at += 1;
                }
            }
            '{' => {
                let Some(close) = chars[at..].iter().position(|&c| c == '}') else { return false };
                let inside: String = chars[at + 1..at + close].iter().collect();
                let bounds: Vec<&str> = inside.split(',').collect();
                let digits = |text: &str| !text.is_empty() && text.chars().all(|c| c.is_ascii_digit());
                let well_formed = match bounds.as_slice() {
                    [n] => digits(n),
                    [n, m] => digits(n) && (m.is_empty() || digits(m)),
                    _ => false,
                };
                if !well_formed || matches!(chars.get(at + close + 1), Some('+' | '?')) {
                    return false;
                }
                at += close + 1;
                continue;
            }
            '$' | '^' | '.' | '}' => return false,
            _ => {
                if caseless && !SAFE_CASELESS.contains(c) && c.is_alphabetic() {
                    return false;
                }
            }
        }
        at += 1;
    }
    !in_class && caseless_stack.is_empty()
}

/// The code points of a one-character regex (a class, an escape or a character), as regex-syntax
/// reads it; case-insensitive when `caseless`.
fn class_of(regex: &str, caseless: bool) -> Option<Vec<(u32, u32)>> {
    let regex = if caseless { format!("(?i:{regex})") } else { regex.to_owned() };
    let hir = regex_syntax::ParserBuilder::new().build().parse(&regex).ok()?;
    match hir.kind() {
        HirKind::Class(Class::Unicode(class)) => Some(ranges(class)),
        HirKind::Literal(literal) => {
            let text = std::str::from_utf8(&literal.0).ok()?;
            let mut chars = text.chars();
            let c = chars.next()?;
            chars.next().is_none().then(|| vec![(c as u32, c as u32)])
        }
        _ => None,
    }
}

fn ranges(class: &ClassUnicode) -> Vec<(u32, u32)> {
    class.ranges().iter().map(|range| (range.start() as u32, range.end() as u32)).collect()
}

/// A fancy-regex expression as a [`Node`] (before the rewrites of [`simplify`]).
fn convert(expr: &Expr, semantics: Semantics) -> Option<Node> {
    Some(match expr {
        Expr::Empty => Node::Empty,
        Expr::Literal { val, casei } => {
            let mut chars = Vec::new();
            for c in val.chars() {
                chars.push(Node::Class(class_of(&regex_syntax::escape(&c.to_string()), *casei)?));
            }
            concat(chars)
        }
        Expr::Delegate { inner, casei } => Node::Class(class_of(inner, *casei)?),
        Expr::Concat(parts) => concat(parts.iter().map(|part| convert(part, semantics)).collect::<Option<_>>()?),
        Expr::Alt(alternatives) => {
            let mut flat = Vec::new();
            for alternative in alternatives {
                match convert(alternative, semantics)? {
                    Node::Alt(inner) => flat.extend(inner),
                    node => flat.push(node),
                }
            }
            Node::Alt(flat)
        }
        Expr::Group(inner) => convert(inner, semantics)?,
        Expr::AstNode(AstNode::AstGroup { inner, .. }, _) => convert(inner, semantics)?,
        Expr::AtomicGroup(inner) => Node::Atomic(Box::new(convert(inner, semantics)?)),
        Expr::Repeat { child, lo, hi, greedy } => {
            let child = convert(child, semantics)?;
            if (*lo, *hi) == (1, 1) {
                child
            } else {
                Node::Repeat { child: Box::new(child), lo: *lo, hi: *hi, greedy: *greedy }
            }
        }
        Expr::LookAround(inner, kind) => {
            let kind = match kind {
                LookAround::LookAhead => LookKind::Ahead,
                LookAround::LookAheadNeg => LookKind::AheadNeg,
                LookAround::LookBehind => LookKind::Behind,
                LookAround::LookBehindNeg => LookKind::BehindNeg,
            };
            Node::LookAround(Box::new(convert(inner, semantics)?), kind)
        }
        Expr::Assertion(Assertion::EndText) => Node::EndText,
        _ => return None,
    })
}

fn concat(parts: Vec<Node>) -> Node {
    let mut flat = Vec::new();
    for part in parts {
        match part {
            Node::Concat(inner) => flat.extend(inner),
            Node::Empty => {}
            node => flat.push(node),
        }
    }
    match flat.len() {
        0 => Node::Empty,
        1 => flat.pop().expect("one part"),
        _ => Node::Concat(flat),
    }
}

/// The normal form of a whole regex: its alternatives simplified, the rules that depend on the
/// alternatives around them applied.
fn top_level(node: Node) -> Node {
    let alternatives = match node {
        Node::Alt(alternatives) => alternatives,
        node => vec![node],
    };
    let mut alternatives: Vec<Node> = alternatives.into_iter().map(|alternative| simplify(alternative, true)).collect();
    alternatives = group_strings(alternatives);
    // A last `C+` after `C+(?!¬C)` is `C`.
    if let [.., before, last] = alternatives.as_mut_slice() {
        if let (Some(class), Node::Repeat { child, lo: 1, hi: usize::MAX, greedy: true }) = (run_not_before_other(before), &*last) {
            if **child == Node::Class(class.clone()) {
                *last = Node::Class(class);
            }
        }
    }
    if alternatives.len() == 1 {
        alternatives.pop().expect("one alternative")
    } else {
        Node::Alt(alternatives)
    }
}

/// `C` when `node` is `C+(?!¬C)`.
fn run_not_before_other(node: &Node) -> Option<Vec<(u32, u32)>> {
    let Node::Concat(parts) = node else { return None };
    let [Node::Repeat { child, lo: 1, hi: usize::MAX, greedy: true }, Node::LookAround(look, LookKind::AheadNeg)] =
        parts.as_slice()
    else {
        return None;
    };
    let (Node::Class(class), Node::Class(other)) = (&**child, &**look) else { return None };
    (complement(class) == *other).then(|| class.clone())
}

fn complement(class: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut unicode = ClassUnicode::new(class.iter().filter_map(|&(first, last)| {
        Some(regex_syntax::hir::ClassUnicodeRange::new(char::from_u32(first)?, char::from_u32(last)?))
    }));
    unicode.negate();
    ranges(&unicode)
}

/// Consecutive alternatives that each match a finite set of strings become one set when their
/// union is prefix-free (then at most one string matches at a place, so their order is moot).
fn group_strings(alternatives: Vec<Node>) -> Vec<Node> {
    let mut out: Vec<Node> = Vec::new();
    let mut pending: Vec<Vec<String>> = Vec::new();
    let flush = |pending: &mut Vec<Vec<String>>, out: &mut Vec<Node>, originals: &mut Vec<Node>| {
        let union: BTreeSet<String> = pending.iter().flatten().cloned().collect();
        if !pending.is_empty() && prefix_free(&union) && union.len() == pending.iter().map(Vec::len).sum::<usize>() {
            out.push(strings_node(union));
        } else {
            out.append(originals);
        }
        originals.clear();
        pending.clear();
    };
    let mut originals = Vec::new();
    for alternative in alternatives {
        match strings(&alternative, 4096) {
            Some(set) => {
                pending.push(set);
                originals.push(alternative);
            }
            None => {
                flush(&mut pending, &mut out, &mut originals);
                out.push(alternative);
            }
        }
    }
    flush(&mut pending, &mut out, &mut originals);
    out
}

/// A set of strings as a node: a class when each is one character (so a class stays a class).
fn strings_node(strings: BTreeSet<String>) -> Node {
    let mut code_points = Vec::new();
    for string in &strings {
        let mut chars = string.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => code_points.push(c as u32),
            _ => return Node::Strings(strings),
        }
    }
    code_points.sort_unstable();
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for code_point in code_points {
        match ranges.last_mut() {
            // Ranges may span the surrogates, as regex-syntax's classes do.
            Some(last) if last.1 + 1 == code_point || (last.1 == 0xD7FF && code_point == 0xE000) => last.1 = code_point,
            _ => ranges.push((code_point, code_point)),
        }
    }
    Node::Class(ranges)
}

fn prefix_free(strings: &BTreeSet<String>) -> bool {
    // In sorted order a string's extensions follow it directly.
    let sorted: Vec<&String> = strings.iter().collect();
    sorted.windows(2).all(|pair| !pair[1].starts_with(pair[0].as_str())) && !strings.contains("")
}

/// The strings `node` matches, in the order it tries them, when they are at most `limit` (and the
/// node has no repetition, look-around or assertion).
fn strings(node: &Node, limit: usize) -> Option<Vec<String>> {
    match node {
        Node::Class(class) => {
            let size: u64 = class.iter().map(|&(first, last)| u64::from(last - first) + 1).sum();
            if size > limit as u64 {
                return None;
            }
            Some(class.iter().flat_map(|&(first, last)| first..=last).filter_map(char::from_u32).map(String::from).collect())
        }
        Node::Strings(set) => Some(set.iter().cloned().collect()),
        Node::Concat(parts) => {
            let mut all = vec![String::new()];
            for part in parts {
                let tails = strings(part, limit)?;
                if all.len() * tails.len() > limit {
                    return None;
                }
                all = all.iter().flat_map(|head| tails.iter().map(move |tail| format!("{head}{tail}"))).collect();
            }
            Some(all)
        }
        Node::Alt(alternatives) => {
            let mut all = Vec::new();
            for alternative in alternatives {
                all.extend(strings(alternative, limit)?);
                if all.len() > limit {
                    return None;
                }
            }
            Some(all)
        }
        Node::Empty => Some(vec![String::new()]),
        _ => None,
    }
}

/// Simplifies a node; `ends_match` when nothing follows it before the match ends (an alternative
/// of the whole regex), so the regex never backtracks into it.
fn simplify(node: Node, ends_match: bool) -> Node {
    match node {
        Node::Concat(parts) => simplify_concat(parts, ends_match),
        Node::Alt(alternatives) => {
            let alternatives = alternatives.into_iter().map(|alternative| simplify(alternative, ends_match)).collect();
            let grouped = group_strings(alternatives);
            if grouped.len() == 1 {
                grouped.into_iter().next().expect("one")
            } else {
                Node::Alt(grouped)
            }
        }
        Node::Atomic(inner) => {
            let inner = simplify(*inner, ends_match);
            if ends_match || single_way(&inner) {
                inner
            } else {
                Node::Atomic(Box::new(inner))
            }
        }
        Node::Repeat { child, lo, hi, greedy } => {
            Node::Repeat { child: Box::new(simplify(*child, false)), lo, hi, greedy }
        }
        Node::LookAround(inner, kind) => Node::LookAround(Box::new(simplify(*inner, false)), kind),
        node => node,
    }
}

/// Whether `node` matches at most one way at a place (no quantifier or alternation to revisit).
fn single_way(node: &Node) -> bool {
    match node {
        Node::Class(_) | Node::EndText | Node::Empty | Node::Strings(_) => true,
        Node::Concat(parts) => parts.iter().all(single_way),
        Node::Atomic(_) => true,
        _ => false,
    }
}

fn simplify_concat(parts: Vec<Node>, ends_match: bool) -> Node {
    let count = parts.len();
    // Whether everything after part `i` always succeeds (matches, possibly empty, and asserts nothing).
    let mut rest_always_succeeds = vec![ends_match; count];
    for i in (0..count.saturating_sub(1)).rev() {
        rest_always_succeeds[i] = rest_always_succeeds[i + 1] && always_succeeds(&parts[i + 1]);
    }
    let mut out: Vec<Node> = Vec::with_capacity(count);
    for (i, part) in parts.iter().enumerate() {
        let next = parts.get(i + 1);
        let part = match part.clone() {
            Node::Atomic(inner) => {
                let inner = simplify(*inner, false);
                let free = rest_always_succeeds[i]
                    || single_way(&inner)
                    || optional_char_not_starting(&inner, next)
                    || (run_of_class(&inner) && next == Some(&Node::EndText) && i + 2 == count && ends_match);
                if free {
                    inner
                } else {
                    Node::Atomic(Box::new(inner))
                }
            }
            other => simplify(other, rest_always_succeeds[i] && i + 1 == count),
        };
        out.push(part);
    }
    // `C*D+` at the end, `D` inside `C`, both greedy: `C*D`.
    if ends_match {
        if let [.., Node::Repeat { child: run, lo: 0, hi: usize::MAX, greedy: true }, Node::Repeat { child: tail, lo: 1, hi: usize::MAX, greedy: true }] =
            out.as_slice()
        {
            if let (Node::Class(outer), Node::Class(inner)) = (&**run, &**tail) {
                if subset(inner, outer) {
                    let tail = Node::Class(inner.clone());
                    out.pop();
                    out.push(tail);
                }
            }
        }
    }
    concat(out)
}

/// Whether `node` matches the empty string at any place, asserting nothing (`X*`, `X?`).
fn always_succeeds(node: &Node) -> bool {
    match node {
        Node::Repeat { lo: 0, child, .. } => !has_assertion(child),
        Node::Atomic(inner) => always_succeeds(inner),
        Node::Empty => true,
        _ => false,
    }
}

fn has_assertion(node: &Node) -> bool {
    match node {
        Node::LookAround(..) | Node::EndText => true,
        Node::Concat(parts) | Node::Alt(parts) => parts.iter().any(has_assertion),
        Node::Repeat { child, .. } | Node::Atomic(child) => has_assertion(child),
        _ => false,
    }
}

/// `C+` (greedy).
fn run_of_class(node: &Node) -> bool {
    matches!(node, Node::Repeat { child, lo: 1, hi: usize::MAX, .. } if matches!(**child, Node::Class(_)))
}

/// Whether `node` is `C?` and `next` must start with a character outside `C` (then taking or not
/// taking the optional character is decided by the character alone).
fn optional_char_not_starting(node: &Node, next: Option<&Node>) -> bool {
    let Node::Repeat { child, lo: 0, hi: 1, greedy: true } = node else { return false };
    let Node::Class(class) = &**child else { return false };
    next.and_then(first_chars).is_some_and(|first| disjoint(class, &first))
}

/// The characters a match of `node` can start with, when it cannot be empty.
fn first_chars(node: &Node) -> Option<Vec<(u32, u32)>> {
    match node {
        Node::Class(class) => Some(class.clone()),
        Node::Repeat { child, lo, .. } if *lo >= 1 => first_chars(child),
        Node::Atomic(inner) => first_chars(inner),
        Node::Concat(parts) => parts.first().and_then(first_chars),
        _ => None,
    }
}

fn disjoint(a: &[(u32, u32)], b: &[(u32, u32)]) -> bool {
    a.iter().all(|&(a_first, a_last)| b.iter().all(|&(b_first, b_last)| a_last < b_first || b_last < a_first))
}

fn subset(inner: &[(u32, u32)], outer: &[(u32, u32)]) -> bool {
    inner.iter().all(|&(first, last)| outer.iter().any(|&(o_first, o_last)| o_first <= first && last <= o_last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::{CL100K, CL100K_ONIGURUMA, GPT2, LLAMA3, O200K, QWEN2};

    fn recognized(regex: &str, semantics: Semantics) -> Option<Scanner> {
        let form = normal_form(regex, semantics)?;
        scanner_with_form(&form, semantics)
    }

    #[test]
    fn every_scanner_regex_is_recognised_as_its_own_scanner() {
        for semantics in [Semantics::FancyRegex, Semantics::Oniguruma] {
            for scanner in Scanner::ALL {
                assert_eq!(recognized(scanner.regex(semantics), semantics), Some(scanner), "{scanner:?} {semantics:?}");
            }
        }
    }

    #[test]
    fn a_regex_over_the_splitters_limit_is_not_parsed() {
        let padded = format!("{GPT2}{}", "|a".repeat(MAX_PATTERN_BYTES));
        assert_eq!(recognize(&SplitRule::Pattern(padded.clone())), None);
        let step = SplitStep::regex(&padded, Behavior::Isolated, false);
        assert_eq!(recognize(&SplitRule::Steps(vec![step])), None);
        assert!(recognize(&SplitRule::Pattern(GPT2.to_owned())).is_some());
    }

    #[test]
    fn other_spellings_of_a_family_are_recognised() {
        let onig = Semantics::Oniguruma;
        // Contractions spelled as cl100k spells them, possessive quantifiers, \s*[\r\n].
        let llama3 = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s*[\r\n]|\s+(?!\S)|\s";
        assert_eq!(recognized(llama3, onig), Some(Scanner::Llama3));
        assert_eq!(recognized(llama3, Semantics::FancyRegex), Some(Scanner::Llama3));
        // Bailing MoE's: Qwen 2's, spelled with cl100k's contractions and possessive quantifiers.
        let bailing = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+";
        assert_eq!(recognized(bailing, onig), Some(Scanner::Qwen2));
        // Seed-Coder's \p{N}{1} and [^\s\p{L}\p{N}\r\n] are Qwen 2's \p{N} and [^\s\p{L}\p{N}].
        assert_eq!(recognized(&LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}{1}"), onig), Some(Scanner::Qwen2));
        assert_eq!(recognized(&QWEN2.replace(r"|\p{N}|", r"|[\p{N}]|"), onig), Some(Scanner::Qwen2));
        // cl100k as tiktoken spells it, read by Oniguruma, is not Oniguruma-safe (`$`, `{1,3}+`).
        assert_eq!(recognized(CL100K, onig), None);
        assert_eq!(recognized(CL100K_ONIGURUMA, onig), Some(Scanner::Cl100k));
        assert_eq!(recognized(GPT2, Semantics::FancyRegex), Some(Scanner::Gpt2));
        assert_eq!(recognized(O200K, onig), Some(Scanner::O200k));
    }

    #[test]
    fn different_meanings_are_not_recognised() {
        let onig = Semantics::Oniguruma;
        // llama.cpp's contractions ('[sS]: no U+017F LONG S), digits in fours, no final \s+.
        let ascii_case = LLAMA3.replace("(?i:'s|'t|'re|'ve|'m|'ll|'d)", "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])");
        assert_eq!(recognized(&ascii_case, onig), None);
        assert_eq!(recognized(&LLAMA3.replace("{1,3}", "{1,4}"), onig), None);
        assert_eq!(recognized(LLAMA3.trim_end_matches(r"|\s+"), onig), None);
        // Oniguruma reads {1,3}+ as a repetition of {1,3}: every digit run is one piece.
        assert_eq!(recognized(&LLAMA3.replace("{1,3}", "{1,3}+"), onig), None);
        // A possessive prefix that a letter could follow is not dropped.
        assert_ne!(normal_form(r"[^\r\n\p{N}]?+\p{L}+", onig), normal_form(r"[^\r\n\p{N}]?\p{L}+", onig));
        // Alternatives in another order.
        assert_eq!(recognized(&LLAMA3.replace(r"\s+(?!\S)|\s+", r"\s+|\s+(?!\S)"), onig), None);
        assert_eq!(recognized(r"\w+|\s+", onig), None);
    }

    #[test]
    fn oniguruma_unsafe_constructs_are_refused() {
        for regex in [r"\h", r"a$", r"^a", r"a.", r"\d", r"\w", r"[[:alpha:]]", r"[a&&b]", r"a{1,3}+", r"a+?", r"(?m:a)", r"(?i:k)", r"\p{Greek}", r"(?<=a)b"] {
            assert!(!oniguruma_safe(regex), "{regex}");
        }
        for scanner in Scanner::ALL {
            assert!(oniguruma_safe(scanner.regex(Semantics::Oniguruma)), "{scanner:?}");
        }
    }
}
