"""Dense and adversarial tool-result content for the edge benchmarks (issue 18).

Each generator makes text of one *content class* whose tokens per character are far
from ordinary English prose, the classes a tokenizer-free heuristic tends to under-count:
delimiter-separated word lists, comma-heavy prose, ``key=value`` pairs, Latin-script
languages other than English, one punctuation mark per line, pretty-printed JSON string
arrays, digits, CJK, emoji, base64, hex, minified JSON ... They are written against the
byte-level BPE pre-tokenizers' rules (a punctuation mark after a letter starts a new
pre-token, digits split into groups of one to three, words outside the vocabularies'
English core split into many pieces), not fitted to any one family.

Invariants: ``generate(name, rng, chars)`` is a pure function of the class, the random
generator's state and the size; it returns about ``chars`` characters (never empty), so
a caller picks sizes in characters and the exact tokenizers say how many tokens that is.
:func:`adversarial_tools` makes tool schemas of the classes the issue found under-counted
in schemas (descriptions full of quotes and backslashes, long integer and string enums).
Nothing here reads files or the network.
"""

# The texts below are in other scripts and languages on purpose (that is what they test).
# ruff: noqa: RUF001

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from typing import Final

__all__ = ["CLASSES", "LANGUAGES", "adversarial_tools", "generate"]


def _split(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Common English nouns and adjectives: short, mostly single tokens in every vocabulary,
# so a list of them costs about one token per word plus one per delimiter.
_ENGLISH_TEXT: Final = (
    "apple banana cherry grape lemon mango melon orange peach pear plum berry kiwi lime "
    "olive onion garlic pepper carrot potato tomato bean rice bread cheese butter milk "
    "cream sugar salt honey coffee tea water juice wine beer soup salad pasta pizza "
    "table chair desk lamp door window floor wall roof house garden street city river "
    "lake ocean island mountain valley forest desert field farm market school office "
    "bank store hotel station airport bridge tower castle church museum library park "
    "red blue green yellow purple white black brown silver golden bright dark quick slow "
    "happy sad calm brave clever gentle proud quiet loud small large tall short young old "
    "cat dog horse cow sheep goat pig duck goose eagle owl fox wolf bear lion tiger mouse "
    "rabbit snake frog fish whale shark dolphin spring summer autumn winter morning "
    "evening night today tomorrow yesterday north south east west left right front back "
    "paper pencil book letter card box bag bottle glass plate spoon fork knife cup bowl "
    "engine wheel motor cable switch sensor socket button screen keyboard printer server"
)
_ENGLISH: Final = _split(_ENGLISH_TEXT)

_LANGUAGE_WORDS: Final = {
    "welsh": (
        "yr y a ac yn ei i o mae roedd gyda ar am wedi bod hefyd ond fel dros rhwng Cymru "
        "Cymraeg llyfr ysgol plentyn plant tŷ dŵr mynydd afon bore nos heddiw yfory ddoe "
        "gwaith amser blwyddyn llawer ychydig newydd hen mawr bach da drwg hapus trist "
        "diolch croeso gwlad pobl iaith hanes cerddoriaeth chwarae ysgrifennu darllen siarad "
        "gweld clywed mynd dod gwneud cael rhoi cymryd meddwl gwybod eisiau angen ddraig "
        "goch eisteddfod Llanfairpwllgwyngyll cwm cwtsh hiraeth ffenestr"
    ),
    "hawaiian": (
        "aloha mahalo ʻohana keiki kāne wahine hale wai moana mauna lani ʻāina pono mana "
        "kōkua nui iki maikaʻi ʻae ʻaʻole ke ka o i me a ua e nā kēia kēlā hoʻi ʻike lōkahi "
        "hauʻoli makahiki lā pō ahiahi kakahiaka ʻōlelo Hawaiʻi kai pua lei hula ʻono "
        "wikiwiki pau hana kumu haumāna kula mele heʻenalu honu ʻulu kalo poi lūʻau"
    ),
    "pinyin": (
        "nǐ hǎo xièxie zàijiàn wǒ tā men shì bú bù de le zài yǒu méiyǒu hěn dà xiǎo rén "
        "Zhōngguó zhōngwén xuéxí gōngzuò shíjiān jīntiān míngtiān zuótiān péngyou jiā chī "
        "fàn hē shuǐ kàn shū xiě zì shuō huà qù lái mǎi dōngxi piàoliang kuàilè Běijīng "
        "Shànghǎi diànnǎo shǒujī lǎoshī xuésheng yīnyuè tiānqì fēicháng kěyǐ xǐhuan"
    ),
    "swahili": (
        "habari jambo asante karibu ndiyo hapana mtu watu mtoto watoto nyumba maji chakula "
        "kula kunywa kusoma kuandika kusema kwenda kuja shule mwalimu wanafunzi kitabu "
        "vitabu kazi leo kesho jana sasa baadaye nzuri mbaya kubwa ndogo sana pia lakini kwa "
        "na ya wa za la cha katika hii hiyo ile nchi Tanzania Kenya Kiswahili rafiki upendo "
        "amani safari tafadhali samahani wanakwenda tutaonana nimefurahi kukutana"
    ),
    "tagalog": (
        "kumusta salamat po opo oo hindi ako ikaw siya kami tayo sila ang ng sa mga na ay at "
        "ito iyan iyon bahay tubig pagkain kumain uminom magbasa sumulat pumunta dumating "
        "paaralan guro estudyante aklat trabaho ngayon bukas kahapon maganda pangit malaki "
        "maliit masaya malungkot kaibigan pamilya Pilipinas Maynila nagsasalita pinapanood "
        "kinakailangan pakikipagkapwa nakakapagpabagabag ipinagmamalaki"
    ),
    "indonesian": (
        "selamat pagi siang malam terima kasih sama-sama ya tidak saya anda dia kami kita "
        "mereka yang dan di ke dari untuk dengan ini itu rumah air makanan makan minum "
        "membaca menulis berbicara pergi datang sekolah guru murid buku pekerjaan besok "
        "kemarin sekarang bagus jelek besar kecil senang sedih teman keluarga Indonesia "
        "Jakarta pemerintahan pertanggungjawaban ketidakadilan memperhatikan perkembangan"
    ),
}
LANGUAGES: Final = tuple(_LANGUAGE_WORDS)

_CJK: Final = (
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过"
    "家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所"
    "本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全"
    "工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教"
)
_KANA_HANGUL: Final = "あいうえおかきくけこさしすせそアイウエオカキクケコ한국어안녕하세요감사합니다"
_EMOJI: Final = "😀😂🥲😍🤔👍👎🙏🎉🔥✨💡📦🚀🐍🌍🌧️☀️🍕🍣⚽🏆❤️💔✅❌⚠️🔒🔑🧪🛠️📈📉🕒"
_PUNCTUATION: Final = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
_MIXED_SCRIPTS: Final = _split(
    "привет мир данные запрос ответ ошибка γειά κόσμος δεδομένα σφάλμα مرحبا بالعالم "
    "البيانات خطأ नमस्ते दुनिया डेटा त्रुटि שלום עולם נתונים שגיאה"
)


def _until(rng: random.Random, chars: int, item: Callable[[], str], sep: str) -> str:
    """Items joined by ``sep`` until the text reaches ``chars`` characters."""
    parts: list[str] = []
    length = 0
    while length < chars or not parts:
        piece = item()
        parts.append(piece)
        length += len(piece) + len(sep)
    return sep.join(parts)


def _word(rng: random.Random) -> str:
    return rng.choice(_ENGLISH)


def _comma_words(rng: random.Random, chars: int) -> str:
    return _until(rng, chars, lambda: _word(rng), ", ")


def _semicolon_words(rng: random.Random, chars: int) -> str:
    return _until(rng, chars, lambda: _word(rng), "; ")


def _tight_commas(rng: random.Random, chars: int) -> str:
    return _until(rng, chars, lambda: _word(rng), ",")


def _comma_prose(rng: random.Random, chars: int) -> str:
    def sentence() -> str:
        clauses = [
            " ".join(rng.choice(_ENGLISH) for _ in range(rng.randint(1, 3)))
            for _ in range(rng.randint(4, 9))
        ]
        text = ", ".join(clauses)
        return text[0].upper() + text[1:] + rng.choice(".;:!?")

    return _until(rng, chars, sentence, " ")


def _key_values(rng: random.Random, chars: int) -> str:
    def pair() -> str:
        key = f"{rng.choice(_ENGLISH)}_{rng.randint(0, 99)}"
        if rng.random() < 0.7:  # words for values: "color=red, size=large"
            return f"{rng.choice(_ENGLISH)}={rng.choice(_ENGLISH)}"
        value = rng.choice((str(rng.randint(0, 99999)), f"{rng.random():.3f}", "true"))
        return f"{key}={value}"

    return _until(rng, chars, pair, ", ")


def _language(name: str) -> Callable[[random.Random, int], str]:
    words = _split(_LANGUAGE_WORDS[name])

    def make(rng: random.Random, chars: int) -> str:
        def sentence() -> str:
            text = " ".join(rng.choice(words) for _ in range(rng.randint(5, 14)))
            return text[0].upper() + text[1:] + rng.choice("..?!,")

        return _until(rng, chars, sentence, " ")

    return make


def _punctuation_lines(rng: random.Random, chars: int) -> str:
    return _until(rng, chars, lambda: rng.choice(_PUNCTUATION), "\n")


def _json_string_array(rng: random.Random, chars: int) -> str:
    items: list[str] = []
    length = 0
    while length < chars or not items:
        item = " ".join(_word(rng) for _ in range(rng.randint(1, 3)))
        items.append(item)
        length += len(item) + 8
    return json.dumps(items, indent=2)


def _digits(rng: random.Random, chars: int) -> str:
    return _until(rng, chars, lambda: str(rng.randint(0, 10 ** rng.randint(1, 12))), " ")


def _digit_lines(rng: random.Random, chars: int) -> str:
    return _until(rng, chars, lambda: str(rng.randint(0, 999)), "\n")


def _cjk(rng: random.Random, chars: int) -> str:
    def sentence() -> str:
        return "".join(rng.choice(_CJK) for _ in range(rng.randint(6, 30))) + rng.choice("，。、")

    return _until(rng, chars, sentence, "")


def _cjk_rare(rng: random.Random, chars: int) -> str:
    # Characters from across the CJK Unified Ideographs block: most are not single
    # tokens in any vocabulary (two or three byte-level pieces each).
    return _until(rng, chars, lambda: chr(rng.randint(0x4E00, 0x9FA5)), "")


def _kana_hangul(rng: random.Random, chars: int) -> str:
    return _until(rng, chars, lambda: rng.choice(_KANA_HANGUL), "")


def _emoji(rng: random.Random, chars: int) -> str:
    def item() -> str:
        return rng.choice(_EMOJI) + (f" {_word(rng)}" if rng.random() < 0.4 else "")

    return _until(rng, chars, item, " ")


def _base64(rng: random.Random, chars: int) -> str:
    raw = rng.randbytes(max(3, chars * 3 // 4))
    text = base64.b64encode(raw).decode()
    return "\n".join(text[i : i + 76] for i in range(0, len(text), 76))


def _hex(rng: random.Random, chars: int) -> str:
    return _until(rng, chars, lambda: rng.randbytes(20).hex(), "\n")


def _uuids(rng: random.Random, chars: int) -> str:
    def uuid() -> str:
        h = rng.randbytes(16).hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    return _until(rng, chars, uuid, ", ")


def _minified_json(rng: random.Random, chars: int) -> str:
    records: list[dict[str, object]] = []
    length = 2
    while length < chars or not records:
        record = {
            "id": rng.randint(1, 10**6),
            "name": _word(rng),
            "tags": [_word(rng) for _ in range(rng.randint(0, 3))],
            "score": round(rng.random() * 100, 2),
            "ok": rng.random() < 0.5,
        }
        records.append(record)
        length += len(json.dumps(record, separators=(",", ":"))) + 1
    return json.dumps(records, separators=(",", ":"))


def _csv_numbers(rng: random.Random, chars: int) -> str:
    def row() -> str:
        return ",".join(f"{rng.uniform(-1000, 1000):.4f}" for _ in range(rng.randint(3, 8)))

    return _until(rng, chars, row, "\n")


def _log_lines(rng: random.Random, chars: int) -> str:
    def line() -> str:
        level = rng.choice(("INFO", "WARN", "DEBUG", "ERROR"))
        day, hour, minute = rng.randint(1, 30), rng.randint(0, 23), rng.randint(0, 59)
        stamp = f"2026-11-{day:02d}T{hour:02d}:{minute:02d}:{rng.randint(0, 59):02d}"
        pairs = (f"{_word(rng)}={rng.randint(0, 9999)}" for _ in range(rng.randint(2, 5)))
        return f"{stamp}.{rng.randint(0, 999):03d}Z {level} [{','.join(pairs)}]"

    return _until(rng, chars, line, "\n")


def _markdown_table(rng: random.Random, chars: int) -> str:
    columns = rng.randint(3, 7)
    header = "| " + " | ".join(_word(rng) for _ in range(columns)) + " |"
    rule = "|" + "---|" * columns

    def row() -> str:
        cells = (rng.choice((_word(rng), str(rng.randint(0, 999)), "-")) for _ in range(columns))
        return "| " + " | ".join(cells) + " |"

    return header + "\n" + rule + "\n" + _until(rng, chars, row, "\n")


def _mixed_scripts(rng: random.Random, chars: int) -> str:
    return _until(rng, chars, lambda: rng.choice(_MIXED_SCRIPTS), " ")


def _urls(rng: random.Random, chars: int) -> str:
    def url() -> str:
        query = "&".join(f"{_word(rng)}={rng.randint(0, 999)}" for _ in range(rng.randint(1, 4)))
        return f"https://{_word(rng)}.example.com/{_word(rng)}/{rng.randint(0, 9999)}?{query}"

    return _until(rng, chars, url, "\n")


def _identifiers(rng: random.Random, chars: int) -> str:
    def ident() -> str:
        parts = [_word(rng).capitalize() for _ in range(rng.randint(2, 4))]
        return "".join(parts) + rng.choice(("", str(rng.randint(0, 99)), "_" + _word(rng)))

    return _until(rng, chars, ident, rng.choice((", ", " ", "\n")))


def _random_ascii(rng: random.Random, chars: int) -> str:
    alphabet = string.ascii_letters + string.digits + _PUNCTUATION
    return "".join(rng.choice(alphabet) for _ in range(max(1, chars)))


CLASSES: Final[dict[str, Callable[[random.Random, int], str]]] = {
    "comma word list": _comma_words,
    "semicolon word list": _semicolon_words,
    "comma list, no spaces": _tight_commas,
    "comma-heavy prose": _comma_prose,
    "key=value with commas": _key_values,
    **{f"{name} text": _language(name) for name in LANGUAGES},
    "one punctuation char per line": _punctuation_lines,
    "pretty JSON string array": _json_string_array,
    "digits": _digits,
    "digit lines": _digit_lines,
    "CJK": _cjk,
    "rare CJK": _cjk_rare,
    "kana / hangul": _kana_hangul,
    "emoji": _emoji,
    "base64": _base64,
    "hex": _hex,
    "uuid list": _uuids,
    "minified JSON": _minified_json,
    "CSV numbers": _csv_numbers,
    "log lines": _log_lines,
    "markdown table": _markdown_table,
    "Cyrillic / Greek / Arabic / Devanagari": _mixed_scripts,
    "URLs": _urls,
    "CamelCase identifiers": _identifiers,
    "random ASCII": _random_ascii,
}
"""Every content class by name; each makes text of about the characters asked for."""


def generate(name: str, rng: random.Random, chars: int) -> str:
    """Text of content class ``name``, at least ``chars`` characters long.

    Args:
        name: a key of :data:`CLASSES`.
        rng: the random generator (the text depends only on its state and ``chars``).
        chars: the smallest length wanted (at least 1 is produced).

    Raises:
        KeyError: an unknown class name.
    """
    return CLASSES[name](rng, max(1, chars))


def adversarial_tools(rng: random.Random) -> list[dict[str, object]]:
    """Three OpenAI-format tool schemas of the schema classes the heuristic under-counts.

    A description full of quotes and backslashes (JSON-escaped once more in every
    template's tool block), an integer enum and a long string enum.
    """
    quoted = " ".join(
        rng.choice(('"quoted"', "\\\\server\\share", "C:\\Users\\x", "'single'", '\\"esc\\"'))
        for _ in range(rng.randint(20, 80))
    )
    integers = sorted(rng.sample(range(10_000), rng.randint(40, 300)))
    strings = [f"{_word(rng)}_{i}" for i in range(rng.randint(50, 300))]

    def tool(name: str, description: str, prop: dict[str, object]) -> dict[str, object]:
        parameters = {"type": "object", "properties": {"value": prop}, "required": ["value"]}
        function = {"name": name, "description": description, "parameters": parameters}
        return {"type": "function", "function": function}

    return [
        tool("escape_path", quoted, {"type": "string", "description": quoted[:200]}),
        tool("pick_code", "Pick one code.", {"type": "integer", "enum": integers}),
        tool("pick_label", "Pick one label.", {"type": "string", "enum": strings}),
    ]
