"""Locales: every language renders every template, no leftover English, ordinals, distances, errors."""

from __future__ import annotations

import json
import re

import pytest

from geoengine.errors import InvalidRequest
from geoengine.narrative import ManeuverType as T
from geoengine.narrative import RoadClass, Stop, build_maneuvers, render
from geoengine.narrative.locales import (
    _locales_dir,
    format_distance,
    load_locale,
    ordinal,
    resolve_language,
    round_distance,
)

from .fixtures import arc, edge, make_path, to_lonlat

LOCALES = ["en-US", "fr", "de", "es", "hi", "ar"]
LANGS = ["en", "fr", "de", "es", "hi", "ar"]
STREET_A = "Carrer Major"
STREET_B = "Avinguda Meritxell"
STREET_C = "CG-2"


def all_maneuver_paths():
    """Paths that together produce every maneuver type."""
    yield make_path([edge(0, 200, name=STREET_A), edge(90, 200, name=STREET_B),
                     edge(90 + 25, 200, name=STREET_A), edge(90 + 25 + 150, 200, name=STREET_B),
                     edge(0, 100, name=STREET_A), edge(180, 100, name=STREET_A, degree=1),
                     edge(210, 100, name=STREET_B), edge(120, 100, name=STREET_A), edge(90, 100, name=STREET_B),
                     edge(60, 300, name=STREET_A), edge(30, 300, name=STREET_B, degree=2),
                     edge(30, 300, name=STREET_B, degree=2), edge(30, 50, name=STREET_A, degree=3),
                     edge(210, 300, name=STREET_B), edge(25, 300, name="", degree=2)],
                    destination_point=to_lonlat(10000, 0), origin_point=to_lonlat(10, 0),
                    stops=[Stop(10, "via", side="left"), Stop(11, "via"), Stop(12, "break", side="right", index=2)])
    # unnamed turns (plain variants), ramps, exits, merges, forks
    yield make_path([edge(0, 200), edge(90, 200), edge(0, 200), edge(270, 200), edge(240, 100), edge(60, 100),
                     edge(0, 200, cls=RoadClass.SECONDARY),
                     edge(30, 150, cls=RoadClass.MOTORWAY, link=True), edge(5, 500, cls=RoadClass.MOTORWAY),
                     edge(25, 150, cls=RoadClass.MOTORWAY, link=True), edge(0, 150, cls=RoadClass.PRIMARY, degree=2),
                     edge(300, 150, cls=RoadClass.MOTORWAY, link=True), edge(20, 150, cls=RoadClass.MOTORWAY),
                     edge(335, 150, cls=RoadClass.MOTORWAY, link=True), edge(0, 150, cls=RoadClass.PRIMARY),
                     edge(3, 150, cls=RoadClass.MOTORWAY, link=True), edge(3, 150, cls=RoadClass.MOTORWAY),
                     edge(340, 500, ref="A-2", cls=RoadClass.MOTORWAY), edge(0, 500, ref="A-3", cls=RoadClass.MOTORWAY),
                     edge(20, 500, cls=RoadClass.MOTORWAY), edge(0, 500, ref=STREET_C, cls=RoadClass.MOTORWAY),
                     edge(340, 500, cls=RoadClass.MOTORWAY),
                     edge(25, 100, name=STREET_C, cls=RoadClass.MOTORWAY, link=True),
                     edge(0, 100, name=STREET_A, cls=RoadClass.MOTORWAY)],
                    destination_point=to_lonlat(-10000, 0))
    # roundabouts with and without street names and exit counts, ferries
    r = 20.0
    for exit_name in (STREET_B, ""):
        yield make_path([edge(0, 150, name=STREET_A, degree=1), edge(pts=arc(r, 180, 90), rb=True),
                         edge(pts=arc(r, 90, 0), rb=True), edge(pts=arc(r, 0, 270), rb=True),
                         edge(270, 150, name=exit_name), edge(270, 2000, name=STREET_C, ferry=True),
                         edge(270, 150, name="", degree=2), edge(270, 2000, ferry=True),
                         edge(270, 150, name=STREET_A, degree=2)])
    yield make_path([edge(pts=arc(r, 90, 0), rb=True), edge(270, 150, degree=3)])
    yield make_path([edge(0, 200, name=STREET_A), edge(212, 200, name=STREET_B), edge(217, 300, name=STREET_B)],
                    origin_point=to_lonlat(-10, 0), other_bearings=[[], [], [250.0, 180.0]])
    yield make_path([edge(0, 100), edge(pts=arc(r, 90, 0), rb=True)])


@pytest.fixture(scope="module")
def maneuver_sets():
    return [build_maneuvers(p) for p in all_maneuver_paths()]


def test_fixture_paths_cover_every_maneuver_type(maneuver_sets):
    seen = {m.type for ms in maneuver_sets for m in ms}
    assert seen == set(T) - {T.NONE}


def test_locales_have_the_same_templates_and_placeholders():
    ref = load_locale("en-US").data
    for tag in LOCALES:
        data = load_locale(tag).data
        assert data["templates"].keys() == ref["templates"].keys(), tag
        for group, variants in ref["templates"].items():
            assert data["templates"][group].keys() == variants.keys(), (tag, group)
            for variant, en_text in variants.items():
                text = data["templates"][group][variant]
                assert set(re.findall(r"\{(\w+)\}", text)) == set(re.findall(r"\{(\w+)\}", en_text)), \
                    (tag, group, variant, text)
        assert data["verbal"].keys() == ref["verbal"].keys(), tag
        for key, en_text in ref["verbal"].items():
            # a language may use the prepositional form of a distance where English uses the plain one
            def ph(t):
                return {p.replace("distance_in", "distance") for p in re.findall(r"\{(\w+)\}", t)}
            assert ph(data["verbal"][key]) == ph(en_text), (tag, key)
        assert len(data["cardinal"]) == 8 and len(data["ordinals"]) == 10
        for unit in ("meters", "kilometers", "feet", "miles"):
            assert "{value}" in data["units"][unit]["other"]


def test_locale_files_are_the_supported_set():
    files = sorted(p.stem for p in _locales_dir().glob("*.json"))
    assert files == sorted(LOCALES)
    for tag in LOCALES:
        json.loads((_locales_dir() / f"{tag}.json").read_text(encoding="utf-8"))


def rendered(maneuver_sets, lang, units="kilometers"):
    for ms in maneuver_sets:
        yield from render(ms, lang, units, "instructions")


def texts(step):
    for k in ("instruction", "verbal_transition_alert_instruction", "verbal_post_transition_instruction"):
        if k in step:
            yield step[k]


STREETS = sorted({STREET_A, STREET_B, STREET_C, "A-2", "A-3"}, key=len, reverse=True)


def strip_streets(text):
    for s in STREETS:
        text = text.replace(s, "")
    return text


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("units", ["kilometers", "miles"])
def test_every_language_renders_every_maneuver(maneuver_sets, lang, units):
    n = 0
    for step in rendered(maneuver_sets, lang, units):
        assert step["instruction"]
        for text in texts(step):
            n += 1
            assert "{" not in text and "}" not in text, text
            assert "  " not in text and not text.startswith(" "), text
    assert n > 100


@pytest.mark.parametrize("lang,script", [("ar", r"[\u0600-\u06FF]"), ("hi", r"[\u0900-\u097F]")])
def test_arabic_and_hindi_have_no_latin_letters_besides_street_names(maneuver_sets, lang, script):
    for step in rendered(maneuver_sets, lang, "miles"):
        for text in texts(step):
            rest = strip_streets(text)
            assert not re.search(r"[A-Za-z]", rest), text
            assert re.search(script, rest), text
    # numbers in Arabic use Arabic-Indic digits
    for step in rendered(maneuver_sets, "ar"):
        if "verbal_post_transition_instruction" in step:
            assert not re.search(r"[0-9]", strip_streets(step["verbal_post_transition_instruction"]))


ENGLISH_WORDS = {"turn", "right", "left", "onto", "continue", "head", "keep", "take", "ramp", "exit", "merge",
                 "roundabout", "ferry", "destination", "waypoint", "arrived", "you", "your", "the", "and", "on",
                 "for", "meters", "kilometers", "miles", "feet", "north", "south", "east", "west", "straight",
                 "bear", "make", "enter", "leave", "is", "at", "fork", "becomes"}
#: English words that are also words of the language
SHARED_WORDS = {"fr": {"destination", "ferry"}, "de": set(), "es": set()}


@pytest.mark.parametrize("lang", ["fr", "de", "es"])
def test_no_leftover_english(maneuver_sets, lang):
    for step in rendered(maneuver_sets, lang, "miles"):
        for text in texts(step):
            words = set(re.findall(r"[^\W\d_]+", strip_streets(text).lower()))
            leftover = words & (ENGLISH_WORDS - SHARED_WORDS[lang])
            assert not leftover, (text, leftover)


def test_instructions_read_right():
    ms = build_maneuvers(make_path([edge(90, 200, name=STREET_A), edge(180, 212, name=STREET_B)]))
    by = {lang: [s["instruction"] for s in render(ms, lang, "kilometers", "instructions")] for lang in LANGS}
    assert by["en"] == ["Head east on Carrer Major.", "Turn right onto Avinguda Meritxell.",
                        "You have arrived at your destination."]
    assert by["fr"][0] == "Dirigez-vous vers l'est sur Carrer Major."
    assert by["de"][1] == "Rechts abbiegen auf Avinguda Meritxell."
    assert by["es"][1] == "Gire a la derecha hacia Avinguda Meritxell."
    assert by["hi"][1] == "Avinguda Meritxell पर दाएँ मुड़ें।"
    assert by["ar"][1] == "انعطف يمينًا إلى Avinguda Meritxell."
    steps = render(ms, "en-US", "kilometers", "instructions")
    assert steps[1]["verbal_transition_alert_instruction"] == "In 200 meters, turn right onto Avinguda Meritxell."
    assert steps[1]["verbal_post_transition_instruction"] == "Continue for 200 meters."
    assert steps[2]["verbal_transition_alert_instruction"] == "In 200 meters, you will arrive at your destination."
    fr = render(ms, "fr", "kilometers", "instructions")
    assert fr[1]["verbal_transition_alert_instruction"] == "Dans 200 mètres, tournez à droite sur Avinguda Meritxell."
    de = render(ms, "de", "kilometers", "instructions")
    assert de[1]["verbal_transition_alert_instruction"].startswith("In 200 Metern: ")


def test_roundabout_instruction_with_ordinal():
    ms = build_maneuvers(make_path([edge(0, 150, name=STREET_A, degree=1), edge(pts=arc(20, 180, 90), rb=True),
                                    edge(pts=arc(20, 90, 0), rb=True), edge(pts=arc(20, 0, 270), rb=True),
                                    edge(270, 150, name=STREET_B)]))
    exp = {"en": "Enter the roundabout and take the 3rd exit onto Avinguda Meritxell.",
           "fr": "Au rond-point, prenez la troisième sortie vers Avinguda Meritxell.",
           "de": "Im Kreisverkehr die dritte Ausfahrt auf Avinguda Meritxell nehmen.",
           "es": "En la rotonda, tome la tercera salida hacia Avinguda Meritxell.",
           "hi": "गोलचक्कर पर Avinguda Meritxell की ओर तीसरा निकास लें।",
           "ar": "عند الدوّار، اسلك المخرج الثالث نحو Avinguda Meritxell."}
    for lang, text in exp.items():
        steps = render(ms, lang, "kilometers", "instructions")
        assert steps[1]["instruction"] == text
        assert steps[1]["roundabout_exit_count"] == 3


@pytest.mark.parametrize("lang,n,text", [
    ("en", 1, "1st"), ("en", 2, "2nd"), ("en", 3, "3rd"), ("en", 4, "4th"), ("en", 11, "11th"), ("en", 12, "12th"),
    ("en", 13, "13th"), ("en", 21, "21st"), ("en", 22, "22nd"), ("en", 23, "23rd"), ("en", 101, "101st"),
    ("en", 111, "111th"), ("fr", 1, "première"), ("fr", 2, "deuxième"), ("fr", 11, "11e"),
    ("de", 1, "erste"), ("de", 7, "siebte"), ("de", 12, "12."), ("es", 1, "primera"), ("es", 3, "tercera"),
    ("es", 11, "11.ª"), ("hi", 1, "पहला"), ("hi", 6, "छठा"), ("hi", 12, "12वाँ"), ("ar", 1, "الأول"),
    ("ar", 10, "العاشر"), ("ar", 12, "رقم ١٢"),
])
def test_ordinals(lang, n, text):
    assert ordinal(n, lang) == text


@pytest.mark.parametrize("meters,units,value,unit", [
    (3, "kilometers", 10, "meters"), (44, "kilometers", 40, "meters"), (96, "kilometers", 100, "meters"),
    (212, "kilometers", 200, "meters"), (226, "kilometers", 250, "meters"), (974, "kilometers", 950, "meters"),
    (990, "kilometers", 1, "kilometers"), (1234, "kilometers", 1.2, "kilometers"),
    (9960, "kilometers", 10, "kilometers"), (23_600, "kilometers", 24, "kilometers"),
    (20, "miles", 70, "feet"), (100, "miles", 350, "feet"), (483, "miles", 0.3, "miles"),
    (1609, "miles", 1, "miles"), (2500, "miles", 1.6, "miles"), (20_000, "miles", 12, "miles"),
])
def test_distance_rounding(meters, units, value, unit):
    assert round_distance(meters, units) == (value, unit)


@pytest.mark.parametrize("lang,meters,units,text", [
    ("en", 212, "kilometers", "200 meters"), ("en", 1000, "kilometers", "1 kilometer"),
    ("en", 483, "miles", "0.3 miles"), ("en", 1609, "miles", "1 mile"), ("en", 0.3, "miles", "10 feet"),
    ("fr", 1500, "kilometers", "1,5 kilomètre"), ("fr", 2000, "kilometers", "2 kilomètres"),
    ("de", 2500, "kilometers", "2,5 Kilometer"), ("de", 483, "miles", "0,3 Meilen"),
    ("es", 1000, "kilometers", "1 kilómetro"), ("es", 1500, "kilometers", "1,5 kilómetros"),
    ("hi", 300, "kilometers", "300 मीटर"), ("ar", 1000, "kilometers", "كيلومتر واحد"),
    ("ar", 2000, "kilometers", "كيلومتران"), ("ar", 5000, "kilometers", "٥ كيلومترات"),
    ("ar", 150, "kilometers", "١٥٠ مترًا"), ("ar", 200, "kilometers", "٢٠٠ متر"),
    ("ar", 1500, "kilometers", "١٫٥ كيلومتر"),
])
def test_distance_words(lang, meters, units, text):
    assert format_distance(meters, units, lang) == text


def test_prepositional_distance_forms():
    assert format_distance(200, "kilometers", "de", prepositional=True) == "200 Metern"
    assert format_distance(2000, "kilometers", "ar", prepositional=True) == "كيلومترين"


@pytest.mark.parametrize("tag,locale", [("en-US", "en-US"), ("en", "en-US"), ("en-GB", "en-US"), ("EN", "en-US"),
                                        ("fr-FR", "fr"), ("fr_CA", "fr"), ("de-AT", "de"), ("es-419", "es"),
                                        ("es-MX", "es"), ("hi-IN", "hi"), ("ar-EG", "ar"), (None, "en-US")])
def test_language_tags(tag, locale):
    assert resolve_language(tag) == locale


@pytest.mark.parametrize("tag", ["it", "pt-BR", "zz", "", "english", "fr FR", "e", "fr--FR"])
def test_unsupported_language_is_400_listing_supported(tag):
    ms = build_maneuvers(make_path([edge(0, 100)]))
    with pytest.raises(InvalidRequest) as e:
        render(ms, tag, "kilometers", "instructions")
    err = e.value
    assert err.status == 400
    for lang in ("en-US", "hi", "fr", "de", "es", "ar"):
        assert lang in err.detail
    assert err.errors[0].field == "directions_options.language"
    with pytest.raises(InvalidRequest) as e:
        render(ms, tag, "kilometers", "none", language_field="language")
    assert e.value.errors[0].field == "language"


def test_directions_types_and_units():
    ms = build_maneuvers(make_path([edge(0, 1000, name=STREET_A), edge(90, 500, name=STREET_B)]), "miles")
    assert render(ms, "fr", "kilometers", "none") == []
    bare = render(ms, "fr", "miles", "maneuvers")
    assert [s["type"] for s in bare] == ["start", "right", "destination"]
    assert all("instruction" not in s and "verbal_post_transition_instruction" not in s for s in bare)
    assert bare[0]["length"] == pytest.approx(1000 / 1609.344, abs=1e-3)
    assert bare[1]["type_code"] == 10
    full = render(ms, "en", "kilometers", "instructions")
    assert full[0]["length"] == pytest.approx(1.0, abs=1e-3)
    keys = {"type", "type_code", "instruction", "street_names", "length", "time", "begin_shape_index",
            "end_shape_index", "bearing_before", "bearing_after", "roundabout_exit_count"}
    assert keys <= full[1].keys()
    with pytest.raises(InvalidRequest) as e:
        render(ms, "en", "kilometers", "verbose")
    assert e.value.errors[0].field == "directions_options.directions_type"
    with pytest.raises(InvalidRequest):
        render(ms, "en", "leagues", "instructions")


def test_narrate_checks_options_before_building():
    from geoengine.narrative import narrate

    path = make_path([edge(0, 1000, name=STREET_A), edge(270, 500, name=STREET_B)])
    assert [s["type"] for s in narrate(path, "de-CH", "mi")] == ["start", "left", "destination"]
    assert narrate(path, "ar", "kilometers", "none") == []
    with pytest.raises(InvalidRequest) as e:
        narrate(path, "ja", "kilometers", "none", language_field="language")
    assert e.value.errors[0].field == "language" and "ar" in e.value.detail


@pytest.mark.parametrize("lang", LANGS)
def test_pre_transition_instruction_says_the_street_names_as_a_list(lang):
    """verbal_pre_transition_instruction on every maneuver (as Valhalla gives it): the instruction, with a
    maneuver's several street names joined by the locale's spoken separator instead of the written one."""
    ms = build_maneuvers(make_path([edge(90, 200, name=STREET_A), edge(180, 212, name=STREET_B, ref=STREET_C)]))
    loc = load_locale(resolve_language(lang))
    steps = render(ms, lang, "kilometers", "instructions")
    assert all(s["verbal_pre_transition_instruction"] for s in steps)
    turn = steps[1]
    assert turn["street_names"] == [STREET_B, STREET_C]
    assert loc.list_separator.join([STREET_B, STREET_C]) in turn["instruction"]
    assert turn["verbal_pre_transition_instruction"] == turn["instruction"].replace(
        loc.list_separator.join([STREET_B, STREET_C]), loc.spoken_separator.join([STREET_B, STREET_C]))
    assert turn["verbal_pre_transition_instruction"] != turn["instruction"]
    assert steps[0]["verbal_pre_transition_instruction"] == steps[0]["instruction"]  # one name: as written
    assert all("verbal_pre_transition_instruction" not in s for s in render(ms, lang, "kilometers", "maneuvers"))
