//! Proof that the hand-written scanners cut text exactly as their regexes do, in each engine
//! separately: fancy-regex (tiktoken's) with [`Scanner::pattern`], and Oniguruma (`tokenizers`')
//! with [`Scanner::regex`] as one Split step. On the shared corpora, the llama.cpp tokenizer test
//! strings, a generated fuzz corpus, and every code point in several contexts.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use hf_bpe_core::pretokenize::{Behavior, SplitRule, SplitStep, Splitter};
use hf_bpe_core::scan::{Scanner, Semantics};

const SHARED_DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data");

/// Compares one scanner with the regex it replaces, in one engine.
struct Differential {
    scanner: Scanner,
    semantics: Semantics,
    regex: Splitter,
}

/// What a comparison found when the pieces are identical.
#[derive(Debug, PartialEq, Eq)]
enum Agreement {
    Identical,
    /// fancy-regex gave up on the text (its backtracking limit); there is nothing to compare.
    RegexGaveUp,
}

impl Differential {
    fn new(scanner: Scanner, semantics: Semantics) -> Self {
        let regex = scanner.regex(semantics);
        let rule = match semantics {
            Semantics::FancyRegex => SplitRule::Pattern(regex.to_owned()),
            Semantics::Oniguruma => SplitRule::Steps(vec![SplitStep::regex(regex, Behavior::Isolated, false)]),
        };
        // The rule itself runs on the scanner; the exact splitter on the engine.
        assert_eq!(Splitter::new(rule.clone()).unwrap().scanner(), Some(scanner), "{scanner:?} {semantics:?}");
        Self { scanner, semantics, regex: Splitter::exact(rule).unwrap() }
    }

    /// Panics, showing the first difference, unless the scanner finds the regex's pieces.
    fn check(&self, text: &str, label: &str) -> Agreement {
        let mut expected = Vec::new();
        if self.regex.for_each_piece(text, |start, end, _| expected.push((start, end))).is_err() {
            return Agreement::RegexGaveUp;
        }
        let mut found = Vec::with_capacity(expected.len());
        self.scanner.for_each_piece(text, |start, end| found.push((start, end)));
        if found != expected {
            panic!("{}", self.describe_difference(text, label, &expected, &found));
        }
        Agreement::Identical
    }

    fn describe_difference(
        &self,
        text: &str,
        label: &str,
        expected: &[(usize, usize)],
        found: &[(usize, usize)],
    ) -> String {
        let first = expected.iter().zip(found).take_while(|(a, b)| a == b).count();
        let show = |pieces: &[(usize, usize)]| -> Vec<&str> {
            pieces[first.saturating_sub(3)..(first + 4).min(pieces.len())]
                .iter()
                .map(|&(start, end)| &text[start..end])
                .collect()
        };
        let mut message = format!(
            "{:?} scanner differs from the regex ({:?}) on {label} at piece {first} ({} regex pieces, {} scanner pieces)\n",
            self.scanner,
            self.semantics,
            expected.len(),
            found.len()
        );
        let _ = writeln!(message, "  regex:   {:?}", show(expected));
        let _ = writeln!(message, "  scanner: {:?}", show(found));
        if text.len() <= 200 {
            let _ = writeln!(message, "  text: {text:?}");
        }
        message
    }
}

/// Every scanner in each engine.
fn each_scanner() -> Vec<Differential> {
    let mut all = Vec::new();
    for semantics in [Semantics::FancyRegex, Semantics::Oniguruma] {
        all.extend(Scanner::ALL.map(|scanner| Differential::new(scanner, semantics)));
    }
    all
}

fn shared_data() -> Option<PathBuf> {
    let path = Path::new(SHARED_DATA);
    if path.is_dir() {
        Some(path.to_owned())
    } else {
        println!("skipped: the shared data folder {SHARED_DATA} is absent");
        None
    }
}

/// Every text file (valid UTF-8) under the shared data folder, with its path.
fn shared_texts(root: &Path) -> Vec<(String, String)> {
    let mut texts = Vec::new();
    let mut folders = vec![root.to_owned()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if let Ok(text) = String::from_utf8(std::fs::read(&path).unwrap()) {
                texts.push((path.display().to_string(), text));
            }
        }
    }
    texts.sort();
    texts
}

fn check_shared_corpora(scanners: &[Scanner]) {
    let Some(root) = shared_data() else { return };
    let texts = shared_texts(&root);
    assert!(texts.iter().any(|(path, _)| path.contains("corpora")), "no corpus under {SHARED_DATA}");
    for &scanner in scanners {
        for semantics in [Semantics::FancyRegex, Semantics::Oniguruma] {
            let differential = Differential::new(scanner, semantics);
            let mut bytes = 0;
            for (path, text) in &texts {
                assert_eq!(differential.check(text, path), Agreement::Identical, "{path}");
                bytes += text.len();
            }
            println!("{scanner:?} ({semantics:?}): identical on {} shared files, {bytes} bytes", texts.len());
        }
    }
}

#[test]
fn gpt2_matches_the_regex_on_the_shared_corpora() {
    check_shared_corpora(&[Scanner::Gpt2]);
}

#[test]
fn cl100k_matches_the_regex_on_the_shared_corpora() {
    check_shared_corpora(&[Scanner::Cl100k]);
}

#[test]
fn o200k_matches_the_regex_on_the_shared_corpora() {
    check_shared_corpora(&[Scanner::O200k]);
}

#[test]
fn cl100k_shaped_family_scanners_match_their_regex_on_the_shared_corpora() {
    check_shared_corpora(&[Scanner::Llama3, Scanner::Qwen2, Scanner::Qwen35, Scanner::SeedCoder]);
}

#[test]
fn tekken_matches_the_regex_on_the_shared_corpora() {
    check_shared_corpora(&[Scanner::Tekken]);
}

#[test]
fn scanners_match_the_regex_on_the_llama_cpp_test_strings() {
    let Some(root) = shared_data() else { return };
    let mut strings = 0;
    for file in ["ggml-vocab-gpt-2.gguf.inp", "ggml-vocab-gpt-2.gguf.out"] {
        let content = std::fs::read_to_string(root.join("llamacpp").join(file)).unwrap();
        for differential in each_scanner() {
            for (number, text) in content.split("\n__ggml_vocab_test__\n").enumerate() {
                differential.check(text, &format!("{file} string {number}"));
            }
        }
        strings += content.split("\n__ggml_vocab_test__\n").count();
    }
    assert!(strings > 30);
}

/// A small deterministic random generator (xorshift64*).
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// Characters grouped by what matters to the patterns.
const LETTERS_ASCII: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
const PUNCTUATION: &str = "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~'/";
const SPACES: &[char] = &[
    ' ', ' ', ' ', '\t', '\n', '\r', '\u{B}', '\u{C}', '\u{85}', '\u{A0}', '\u{1680}', '\u{2000}',
    '\u{2003}', '\u{200A}', '\u{2028}', '\u{2029}', '\u{202F}', '\u{205F}', '\u{3000}',
    // Not white space, though they look like it.
    '\u{200B}', '\u{180E}', '\u{FEFF}', '\u{1C}',
];
const MARKS: &[char] =
    &['\u{300}', '\u{301}', '\u{36F}', '\u{483}', '\u{93F}', '\u{94D}', '\u{E31}', '\u{20DD}', '\u{FE0F}'];
#[rustfmt::skip]
const SCRIPTS: &[&str] = &[
    "中文字", "ひらがな", "カタカナー", "々", "ภาษาไทย", "हिन्दी", "Ελληνικά", "ΑΒΓ", "Жук", "україна",
    "Tiếng Việt", "ß", "ÿ", "ŉ", "ÀÉÎ", "ǅ", "ǈǋ", "ᾈ", "ʰ", "ˆ", "א", "عربي", "ꙮ", "Ⅻ", "ⅻ", "½",
    "²", "٠١٢٣", "۴۵", "０１２３", "१२३", "𝟘𝟙", "©", "€", "∑", "👨\u{200D}👩\u{200D}👧", "❤\u{FE0F}",
    "🇺🇸", "👍🏽", "\u{378}", "\u{E000}", "\u{F8FF}", "\u{F0000}", "\u{10FFFF}", "\u{E0001}",
    "\u{1D400}", "Ω", "K", "ſ", "\u{17F}T", "İ", "ı",
];
const CONTRACTIONS: &[&str] = &["s", "t", "re", "ve", "m", "ll", "d", "S", "T", "RE", "Ve", "M", "lL", "D"];

const TRICKY: &[&str] = &["/", "\n/", "/\n", "\r\n", " '", "' ", "K'", "K", "\u{212A}", "' s"];

fn fragment(random: &mut Random, out: &mut String) {
    match random.below(13) {
        0 | 1 => {
            for _ in 0..=random.below(8) {
                out.push(char::from(random.pick(LETTERS_ASCII.as_bytes())));
            }
        }
        2 => {
            for _ in 0..=random.below(6) {
                out.push(char::from(b'0' + random.below(10) as u8));
            }
        }
        3 => {
            for _ in 0..=random.below(3) {
                out.push(char::from(random.pick(PUNCTUATION.as_bytes())));
            }
        }
        4 => {
            out.push('\'');
            let letters = random.pick(CONTRACTIONS);
            // Contraction letters, sometimes with a case-folding look-alike.
            for letter in letters.chars() {
                out.push(match (letter, random.below(6)) {
                    ('s' | 'S', 0) => '\u{17F}',
                    (_, 1) => letter.to_ascii_uppercase(),
                    _ => letter,
                });
            }
        }
        5 | 6 => {
            let longest = if random.below(10) == 0 { 60 } else { 3 };
            for _ in 0..=random.below(longest) {
                out.push(random.pick(SPACES));
            }
        }
        7 => out.push(random.pick(MARKS)),
        8 | 9 => out.push_str(random.pick(SCRIPTS)),
        10 => {
            // Any scalar value at all.
            let code_point = loop {
                if let Some(c) = char::from_u32(random.below(0x11_0000) as u32) {
                    break c;
                }
            };
            out.push(code_point);
        }
        11 => out.push_str(random.pick(TRICKY)),
        _ => out.push(' '),
    }
}

/// Pseudo-random texts mixing everything the patterns treat specially; a third end in white space.
fn fuzz_texts(seed: u64, count: usize) -> Vec<String> {
    let mut random = Random(seed);
    (0..count)
        .map(|_| {
            let mut text = String::new();
            for _ in 0..random.below(40) {
                fragment(&mut random, &mut text);
            }
            if random.below(3) == 0 {
                for _ in 0..=random.below(4) {
                    text.push(random.pick(SPACES));
                }
            }
            text
        })
        .collect()
}

#[test]
fn scanners_match_the_regex_on_fuzzed_text() {
    let texts = fuzz_texts(0x5EED_CAFE_F00D_1234, 30_000);
    let bytes: usize = texts.iter().map(String::len).sum();
    for differential in each_scanner() {
        let mut gave_up = 0;
        for (number, text) in texts.iter().enumerate() {
            if differential.check(text, &format!("fuzz text {number}")) == Agreement::RegexGaveUp {
                gave_up += 1;
            }
        }
        assert_eq!(gave_up, 0);
        // The texts joined are one more, longer text.
        differential.check(&texts.concat(), "all fuzz texts joined");
    }
    println!("identical on {} fuzz texts, {bytes} bytes", texts.len());
}

/// Every Unicode scalar value.
fn all_chars() -> impl Iterator<Item = char> {
    (0..0x11_0000u32).filter_map(char::from_u32)
}

#[test]
fn scanners_match_the_regex_on_every_code_point_alone() {
    for differential in each_scanner() {
        let mut text = String::new();
        for c in all_chars() {
            text.clear();
            text.push(c);
            differential.check(&text, &format!("U+{:04X} alone", c as u32));
        }
    }
}

#[test]
fn scanners_match_the_regex_on_every_code_point_in_context() {
    // `{}` stands for the code point; each context is repeated for a block of consecutive code
    // points in one text, so neighbours meet too.
    #[rustfmt::skip]
    const CONTEXTS: &[&str] = &[
        "{}", "a{}b", " {}", "{} ", "'{}", "'l{}", "x'{}e ", "A{}", "AB{}c", "1{}", "{}a", "\n{}",
        "{}{} ", " {}A", "{}\r\n", "\u{301}{}",
    ];
    const BLOCK: u32 = 1024;
    let chars: Vec<char> = all_chars().collect();
    for differential in each_scanner() {
        for context in CONTEXTS {
            let (before, after) = context.split_once("{}").unwrap();
            for block in chars.chunks(BLOCK as usize) {
                let mut text = String::new();
                for &c in block {
                    text.push_str(before);
                    text.push(c);
                    text.push_str(&after.replace("{}", &c.to_string()));
                }
                let label = format!("context {context:?} from U+{:04X}", block[0] as u32);
                assert_eq!(differential.check(&text, &label), Agreement::Identical, "{label}");
            }
        }
    }
}

#[test]
fn scanners_match_the_regex_on_very_long_runs() {
    // fancy-regex gives up (backtracking limit) on a run of 10^6 white-space characters before a
    // non-space; stay just below that.
    const LONG: usize = 999_000;
    let texts = [
        format!("{}x", " ".repeat(LONG)),
        format!("{}x", " \t".repeat(LONG / 2)),
        format!("{}x", "\n".repeat(LONG)),
        format!("x{} ", " \n".repeat(LONG / 2)),
        format!("{}'s", "A".repeat(LONG)),
        format!("中{} ", "A".repeat(LONG)),
        "a".repeat(LONG),
        "1".repeat(LONG),
        format!("{}\n/", "!".repeat(LONG)),
    ];
    for differential in each_scanner() {
        for text in &texts {
            let label = format!("{:?}... ({} bytes)", &text[..4], text.len());
            assert_eq!(differential.check(text, &label), Agreement::Identical, "{label}");
        }
    }
}

#[test]
fn scanners_split_white_space_runs_the_regex_gives_up_on() {
    let text = format!("{}x", " ".repeat(2_000_000));
    for differential in each_scanner().into_iter().filter(|differential| differential.semantics == Semantics::FancyRegex) {
        assert!(differential.regex.pieces(&text).is_err(), "fancy-regex now handles {} spaces", text.len());
        // As on a short run: all spaces but the last, then the last space with the word.
        let short = "     x";
        assert_eq!(differential.check(short, "five spaces and x"), Agreement::Identical);
        let mut pieces = Vec::new();
        differential.scanner.for_each_piece(&text, |start, end| pieces.push((start, end)));
        assert_eq!(pieces, [(0, text.len() - 2), (text.len() - 2, text.len())]);
    }
}

/// The classes `hf_bpe_core::recognize` lets an Oniguruma regex use mean the same there as in
/// regex-syntax (whose tables the scanners and the normal form use), on every code point.
#[test]
fn recognised_classes_mean_the_same_in_oniguruma() {
    use hf_bpe_core::recognize::{SAFE_CASELESS, SAFE_PROPERTIES};
    use regex_syntax::hir::{Class, HirKind};
    let mut classes: Vec<String> = vec![r"\s".to_owned(), r"\S".to_owned()];
    classes.extend(SAFE_PROPERTIES.iter().flat_map(|name| [format!(r"\p{{{name}}}"), format!(r"\P{{{name}}}")]));
    classes.extend(SAFE_CASELESS.chars().map(|c| format!("(?i:{c})")));
    for class in &classes {
        let hir = regex_syntax::Parser::new().parse(class).unwrap();
        let ranges: Vec<(char, char)> = match hir.kind() {
            HirKind::Class(Class::Unicode(ranges)) => ranges.ranges().iter().map(|range| (range.start(), range.end())).collect(),
            HirKind::Literal(literal) => {
                let c = std::str::from_utf8(&literal.0).unwrap().chars().next().unwrap();
                vec![(c, c)]
            }
            other => panic!("{class} is not a class: {other:?}"),
        };
        let oniguruma = onig::Regex::new(&format!(r"\A(?:{class})\z")).unwrap();
        let mut text = String::new();
        for c in all_chars() {
            text.clear();
            text.push(c);
            let inside = ranges.iter().any(|&(first, last)| (first..=last).contains(&c));
            assert_eq!(oniguruma.is_match(&text), inside, "{class} at U+{:04X}", c as u32);
        }
    }
}
