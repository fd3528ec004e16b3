"""The GBNF front-end: syntax, errors, and the languages of small and shipped grammars."""

from __future__ import annotations

import random
import re

import pytest
from support.oracle import Recognizer

from automask import Grammar, GrammarError, UnsupportedFeature
from automask.grammar.gbnf import parse_gbnf


def check(grammar: Grammar, good: list, bad: list) -> None:
    rec = Recognizer(grammar)
    for s in good:
        assert rec.accepts(s), f"should accept {s!r}"
    for s in bad:
        assert not rec.accepts(s), f"should reject {s!r}"


# --------------------------------------------------------------------------- inline grammars

CALC = r"""
# integer arithmetic with precedence
root   ::= expr
expr   ::= term (sp [-+] sp term)*
term   ::= factor (sp [*/] sp factor)*
factor ::= number | "(" sp expr sp ")" | "-" factor
number ::= [0-9]+
sp     ::= " "?
"""

JSONISH = r"""
root    ::= value
value   ::= object | array | string | number
          | "true" | "false" | "null"
object  ::= "{" ws ( member ( "," ws member )* )? "}"
member  ::= string ws ":" ws value ws
array   ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string  ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number  ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws      ::= [ \t\n]*
"""

LIST = r"""
root ::= item{1,3}          # one to three items
item ::= "* " word (", " word)* "\n"
word ::= [a-zA-Z\u00C0-\u024F]+
"""


def test_calc_language():
    check(parse_gbnf(CALC),
          ["1", "1 + 2", "(1+2)*3", "-4 / (2 - -1)", "((7))", "12*34+5"],
          ["", "1 +", "(1+2", "1 ++ 2", "a", "1  + 2", "()"])


def test_jsonish_language():
    check(parse_gbnf(JSONISH),
          ['{}', '[]', '{"a": [1, -2.5e+3, true, null]}', '"\\u00e9\\n"', '[ "é", {"k":"v"} ]',
           '0', '-0.5E7'],
          ['{', '{"a" 1}', '[1,]', '01', '"\\x"', '"a\nb"', '{"a":1,}', 'tru'])


def test_list_language():
    check(parse_gbnf(LIST),
          ["* a\n", "* apple, Pear\n* x\n", "* crème, brûlée\n* a\n* b\n"],
          ["", "* a", "*a\n", "* a,b\n", "* a\n* b\n* c\n* d\n", "* 1\n"])


def test_multiline_bodies_and_empty_alternatives():
    g = parse_gbnf('root ::=\n  | "a"\n  | "b" "c"\n\nother ::= "x"\n')
    check(g, ["", "a", "bc"], ["b", "x", "ab"])
    # a trailing '|' then newline, as llama.cpp writes it
    g = parse_gbnf('root ::= "a" |\n  "b"\n')
    check(g, ["a", "b"], ["", "ab"])


def test_repetition_forms():
    g = parse_gbnf('root ::= "a"{2} "b"{1,} "c"{0,2} "d"{ 1 , 2 }')
    check(g, ["aabd", "aabbbccdd", "aabcd"], ["abd", "aad", "aabcccd", "aabddd"])
    g = parse_gbnf('root ::= ("x" root "y")? "z"*')  # recursion under a postfix
    check(g, ["", "xy", "xxyy", "xzy", "zz"], ["x", "xyy", "yx"])


def test_escapes_and_any_char():
    g = parse_gbnf(r'root ::= "\x41\u00e9\U0001F600\t\\\"\[\]" . [\n\r]')
    check(g, ['Aé😀\t\\"[]x\n', 'Aé😀\t\\"[]\U0010FFFF\r'],
          ['Aé😀\t\\"[]\n', 'Aé😀\t\\"[]xx\n', b'A\xc3\xa9\xf0\x9f\x98\x80\t\\"[]\xff\n'])


def test_char_classes_match_python_re():
    rng = random.Random(7)
    cases = [r"[^a-z\u00e9]", r"[a-z0-9_-]", r"[-+*/]", r"[\u0100-\u2000\U00010000-\U0001FFFF]",
             r"[^\x00-\x7F]", r"[!-/:-@\[-`{-~]", r"[^\]\[]"]
    points = [rng.randrange(0x110000) for _ in range(300)] + list(range(0, 0x180)) + [
        0x7FF, 0x800, 0xFFFF, 0x10000, 0x10FFFF, 0xE000, 0xD7FF]
    for cls in cases:
        rec = Recognizer(parse_gbnf(f"root ::= {cls}"))
        pyre = re.compile(cls)
        for cp in points:
            if 0xD800 <= cp <= 0xDFFF:
                continue
            ch = chr(cp)
            assert rec.accepts(ch) == bool(pyre.fullmatch(ch)), (cls, hex(cp))


def test_names_comments_and_refs():
    g = parse_gbnf("# leading comment\nroot ::= en-char my_rule2 # trailing\n"
                   "en-char ::= [a-c] # comment\nmy_rule2 ::= \"!\"\n")
    check(g, ["a!", "c!"], ["d!", "a"])


def test_negated_empty_class_is_any_char():
    check(parse_gbnf("root ::= [^]"), ["a", "\n", "😀"], ["", "ab"])


def test_grammar_from_gbnf_door():
    g = Grammar.from_gbnf('root ::= "hi"')
    assert g.source == "gbnf"
    check(g, ["hi"], ["h"])


def test_unused_rules_are_fine_but_must_be_defined():
    check(parse_gbnf('root ::= "a"\nunused ::= "b"'), ["a"], ["b"])
    with pytest.raises(GrammarError) as err:
        parse_gbnf('root ::= "a"\nunused ::= missing')
    assert err.value.location == "line 2, col 12"


# --------------------------------------------------------------------------- errors

@pytest.mark.parametrize("text, location, fragment", [
    ('root ::= "a" foo', "line 1, col 14", "undefined rule 'foo'"),
    ('root ::= "a"\nroot ::= "b"', "line 2, col 1", "defined twice"),
    ('start ::= "a"', "line 1, col 1", "no 'root'"),
    ('root ::= "abc', "line 1, col 10", "unterminated string"),
    ('root ::= "ab\n"', "line 1, col 10", "unterminated string"),
    ('root ::= [abc', "line 1, col 10", "unterminated character class"),
    ('root ::= []', "line 1, col 10", "empty character class"),
    ('root ::= [z-a]', "line 1, col 11", "reversed"),
    ('root ::= "\\q"', "line 1, col 11", "unknown escape"),
    ('root ::= "\\x4"', "line 1, col 11", "hex digits"),
    ('root ::= "\\UFFFFFFFF"', "line 1, col 11", "out of range"),
    ('root ::= ("a"', "line 1, col 10", "unclosed '('"),
    ('root ::= ("a"\nx ::= "b")', "line 2, col 1", "expected ')'"),
    ('root ::= "a")', "line 1, col 13", "expected a rule name"),
    ('root ::= * "a"', "line 1, col 10", "must follow an item"),
    ('root ::= "a"{3,1}', "line 1, col 13", "reversed"),
    ('root ::= "a"{x}', "line 1, col 14", "expected a number"),
    ('root ::= "a"{1', "line 1, col 15", "expected '}'"),
    ('root = "a"', "line 1, col 6", "expected '::='"),
    ('root ::= "a" x ::= "b"', "line 1, col 14", "new line"),
    ('root ::= "a"\n  ::= "b"', "line 2, col 3", "'::=' without a rule name"),
    ('root ::= "a" @', "line 1, col 14", "unexpected character"),
    ('', "line 1, col 1", "no 'root'"),
])
def test_errors_have_locations(text, location, fragment):
    with pytest.raises(GrammarError) as err:
        parse_gbnf(text)
    assert err.value.location == location
    assert fragment in err.value.message


def test_token_syntax_is_unsupported():
    with pytest.raises(UnsupportedFeature) as err:
        parse_gbnf('root ::= "a" <[1234]>')
    assert err.value.location == "line 1, col 14"


def test_grammar_with_no_string_is_an_error():
    with pytest.raises(GrammarError):
        parse_gbnf("root ::= root")


def test_productive_rules_through_a_long_chain():
    # Rule k is productive only once rule k+1 is, and they are listed root first: the
    # productive-rule pass must follow the chain back (and drop the unproductive loop).
    n = 100
    rules = ["root ::= a0"] + [f'a{k} ::= "x" a{k + 1} | loop' for k in range(n)]
    rules += [f'a{n} ::= "y"', 'loop ::= "z" loop']
    g = parse_gbnf("\n".join(rules))
    assert "loop" not in {p.lhs for p in g.productions}
    check(g, ["x" * n + "y"], ["x" * (n - 1) + "y", "x" * n + "z", "y"])


def test_a_chain_of_5000_rules_compiles(tiny_bpe_vocab):
    """Grammar size is not bounded by recursion: a 5,000-rule chain is one language."""
    import automask

    n = 5000
    rules = ["root ::= a0"] + [f'a{k} ::= "x" a{k + 1}' for k in range(n)] + [f'a{n} ::= "y"']
    compiled = automask.compile(parse_gbnf("\n".join(rules)), tiny_bpe_vocab)
    for text, complete in ((b"x" * n + b"y", True), (b"x" * (n - 1) + b"y", False)):
        m = automask.Matcher(compiled)
        ok = m.accept_bytes(text)
        assert (ok and m.is_accepting()) == complete


# --------------------------------------------------------------------------- shipped grammars

SHIPPED = {
    "arithmetic": (
        ["1=1\n", "a+b= (c)\n", "x1 *(2 -y)=z \n", "(1)=2\n10/2= 5\n"],
        ["1=1", "1=\n", "=1\n", "1+=1\n", "A=1\n"]),
    "c": (
        ["int main(){return 0;}",
         "int f(int x){x = x+1;return x;}float g(){}",
         "int main(){int a = 1;while(a<10){a = a*2;}if(a==16){}else{}}",
         "char c(){// hi\n/* multi\n * line */for(i = 0; i<3; i = i+1){}}",
         ""],
        ["int main(){return 0}", "main(){}", "int main(){x=1;}", "int f(int){}",
         "int main(){/* no end}"]),
    "chess": (
        ["1. e4 e5\n2. Nf3 Nc6\n", "1. d4 d5\n2. c4 dxc4\n3. O-O O-O-O+\n",
         "1. e4 e5\n10. exd8=Q# Kxd8\n"],
        ["1. e4 e5\n", "1. e4 e5\n2. Nf3\n", "1. e9 e5\n2. a3 a6\n", "1.e4 e5\n2. a3 a6\n",
         "1. e4 e5\n0. a3 a6\n"]),
    "english": (
        ["Hello, world!", "a b\tc\nd", "[x] \\ {y}~"],
        ["", " leading", "double  space", "trailing ", "é"]),
    "japanese": (
        ["こんにちは", "カタカナ 漢字", "日本語、です。"],
        ["", "abc", "こんにちは ", "日本  語"]),
    "json": (
        ['{}', '{"a": [1, 2.5, true, null, "x\\n"]}', '{"k": {"n": -0.5e3}}\n ',
         '{"u": "\\u00e9é"}'],
        ['[]', '{"a":}', '{"a": 01}', '{"a": 1,}', '{a: 1}', '{"a": 1e10}']),
    "json_arr": (
        ['[\n]', '[\n1,\n2]', '[\n{"a": "b"},\n [ ]]'],
        ['[]', '[\n1,2]', '[\n1]\n', '{}']),
    "list": (
        ["- a\n", "- first item\n- second\n", "- é😀 ok\n"],
        ["", "- \n", "- a", "-a\n", "- a\rb\n", "- a\u2028b\n"]),
}


@pytest.fixture
def gbnf_dir(shared_data):
    """The shipped llama.cpp grammars (``shared_data`` skips when ../shared/data is absent)."""
    folder = shared_data / "grammars" / "gbnf"
    if not folder.is_dir():
        pytest.skip(f"shared data has no GBNF grammars: {folder}")
    return folder


@pytest.mark.data
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_grammar(gbnf_dir, name):
    grammar = parse_gbnf((gbnf_dir / f"{name}.gbnf").read_text(encoding="utf-8"))
    good, bad = SHIPPED[name]
    check(grammar, good, bad)


@pytest.mark.data
def test_every_shipped_grammar_compiles(gbnf_dir):
    paths = sorted(gbnf_dir.glob("*.gbnf"))
    assert {p.stem for p in paths} >= set(SHIPPED)
    for path in paths:
        g = parse_gbnf(path.read_text(encoding="utf-8"))
        assert g.productions and g.start == "root"
