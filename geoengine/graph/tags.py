"""OSM tag rules: which ways are roads, road class, per-mode access, oneway, speed, surface and limits.

Pure functions of a tag dict; no graph code here (the build in `geoengine.graph.build` applies them to
every way). Units: speeds km/h, dimensions metres, weights tonnes. docs/graph.md lists the rules.
"""

from __future__ import annotations

import re

# --- travel modes: one bit each ------------------------------------------------------------------
AUTO = 1
PEDESTRIAN = 2
BICYCLE = 4
TRUCK = 8
BUS = 16
MOTORCYCLE = 32
MOTOR_SCOOTER = 64
TAXI = 128
ALL_MODES = 255
MOTOR = AUTO | TRUCK | BUS | MOTORCYCLE | MOTOR_SCOOTER | TAXI
VEHICLES = MOTOR | BICYCLE  # everything that obeys oneway and turn restrictions
MODE_BITS = {
    "auto": AUTO,
    "pedestrian": PEDESTRIAN,
    "bicycle": BICYCLE,
    "truck": TRUCK,
    "bus": BUS,
    "motorcycle": MOTORCYCLE,
    "motor_scooter": MOTOR_SCOOTER,
    "taxi": TAXI,
}

# Most specific key first; the first key with a recognised value decides.
ACCESS_KEYS = {
    AUTO: ("motorcar", "motor_vehicle", "vehicle", "access"),
    PEDESTRIAN: ("foot", "access"),
    BICYCLE: ("bicycle", "vehicle", "access"),
    TRUCK: ("hgv", "motor_vehicle", "vehicle", "access"),
    BUS: ("bus", "psv", "motor_vehicle", "vehicle", "access"),
    MOTORCYCLE: ("motorcycle", "motor_vehicle", "vehicle", "access"),
    MOTOR_SCOOTER: ("moped", "mofa", "motor_vehicle", "vehicle", "access"),
    TAXI: ("taxi", "psv", "motorcar", "motor_vehicle", "vehicle", "access"),
}
GENERIC_KEYS = ("access", "vehicle")
#: every key `mode_access` may read (plain and directional): a way with none of them takes its class default
_ACCESS_TAG_KEYS = frozenset(k + s for keys in ACCESS_KEYS.values() for k in keys for s in ("", ":forward", ":backward"))
_ACCESS_BITS = 0
for _bit in ACCESS_KEYS:
    _ACCESS_BITS |= _bit
CONSTRUCTION_OPEN = (None, "no", "minor", "widening")
ALLOW = {"yes", "designated", "permissive", "official", "public", "true", "1", "discouraged", "permit"}
DESTINATION = {"destination", "delivery", "customers"}
DENY = {"no", "private", "agricultural", "forestry", "use_sidepath", "military", "emergency", "false", "0",
        "restricted", "agricultural;forestry", "dismount"}

# --- road classes ----------------------------------------------------------------------------------
CLASS_NAMES = [
    "motorway", "trunk", "primary", "secondary", "tertiary", "unclassified", "residential", "service",
    "living_street", "track", "road", "pedestrian", "footway", "path", "cycleway", "bridleway", "steps",
    "ferry", "busway",
]
CLASS = {name: i for i, name in enumerate(CLASS_NAMES)}
HIGHWAY_CLASS = {
    **{name: CLASS[name] for name in CLASS_NAMES if name not in ("ferry",)},
    "motorway_link": CLASS["motorway"], "trunk_link": CLASS["trunk"], "primary_link": CLASS["primary"],
    "secondary_link": CLASS["secondary"], "tertiary_link": CLASS["tertiary"],
    "corridor": CLASS["footway"], "platform": CLASS["footway"], "elevator": CLASS["footway"],
    "bus_guideway": CLASS["busway"],
}
P, B = PEDESTRIAN, BICYCLE
DEFAULT_ACCESS = {
    "motorway": MOTOR & ~MOTOR_SCOOTER, "trunk": ALL_MODES, "primary": ALL_MODES, "secondary": ALL_MODES,
    "tertiary": ALL_MODES, "unclassified": ALL_MODES, "residential": ALL_MODES, "service": ALL_MODES,
    "living_street": ALL_MODES, "track": ALL_MODES, "road": ALL_MODES, "pedestrian": P, "footway": P,
    "path": P | B, "cycleway": P | B, "bridleway": P, "steps": P, "ferry": ALL_MODES, "busway": BUS,
}
# Class default speed (km/h) when no maxspeed is tagged; links use LINK_SPEED.
DEFAULT_SPEED = {
    "motorway": 110, "trunk": 90, "primary": 70, "secondary": 60, "tertiary": 50, "unclassified": 40,
    "residential": 30, "service": 20, "living_street": 10, "track": 15, "road": 30, "pedestrian": 5,
    "footway": 5, "path": 10, "cycleway": 20, "bridleway": 5, "steps": 2, "ferry": 20, "busway": 40,
}
LINK_SPEED = {"motorway": 60, "trunk": 50, "primary": 40, "secondary": 35, "tertiary": 30}

# --- flag bits (uint32 per segment) --------------------------------------------------------------------
F_LINK = 1 << 0
F_ROUNDABOUT = 1 << 1
F_TOLL = 1 << 2
F_TOLL_HGV = 1 << 3
F_FERRY = 1 << 4
F_UNPAVED = 1 << 5
F_TUNNEL = 1 << 6
F_BRIDGE = 1 << 7
F_SIDEWALK = 1 << 8
F_LIT = 1 << 9
F_ALLEY = 1 << 10
F_DRIVEWAY = 1 << 11
F_PARKING_AISLE = 1 << 12
F_DRIVE_THROUGH = 1 << 13
F_HAZMAT_NO = 1 << 14
F_MOTORROAD = 1 << 15
F_SPEED_TAGGED = 1 << 16
F_BORDER = 1 << 17
F_BARRIER = 1 << 18
F_AREA = 1 << 19
F_CYCLE_LANE = 1 << 20
FLAG_NAMES = {
    "link": F_LINK, "roundabout": F_ROUNDABOUT, "toll": F_TOLL, "toll_hgv": F_TOLL_HGV, "ferry": F_FERRY,
    "unpaved": F_UNPAVED, "tunnel": F_TUNNEL, "bridge": F_BRIDGE, "sidewalk": F_SIDEWALK, "lit": F_LIT,
    "alley": F_ALLEY, "driveway": F_DRIVEWAY, "parking_aisle": F_PARKING_AISLE,
    "drive_through": F_DRIVE_THROUGH, "hazmat_no": F_HAZMAT_NO, "motorroad": F_MOTORROAD,
    "speed_tagged": F_SPEED_TAGGED, "border": F_BORDER, "barrier": F_BARRIER, "area": F_AREA,
    "cycle_lane": F_CYCLE_LANE,
}

# --- surface classes (uint8): 0 unknown, then from best to worst ----------------------------------------
SURFACE_NAMES = ["unknown", "paved_smooth", "paved", "paved_rough", "compacted", "gravel", "dirt", "impassable"]
SURFACE = {
    "asphalt": 1, "concrete": 1, "concrete:plates": 2, "concrete:lanes": 2, "paved": 2, "metal": 2,
    "wood": 2, "chipseal": 2, "paving_stones": 2, "paving_stones:30": 2, "tartan": 1, "rubber": 2,
    "sett": 3, "cobblestone": 3, "unhewn_cobblestone": 3, "cobblestone:flattened": 3, "brick": 3,
    "bricks": 3, "grass_paver": 4, "compacted": 4, "fine_gravel": 4, "gravel": 5, "pebblestone": 5,
    "unpaved": 5, "woodchips": 5, "rock": 5, "dirt": 6, "earth": 6, "ground": 6, "mud": 7, "sand": 7,
    "grass": 7, "ice": 7, "snow": 7, "salt": 7,
}
TRACKTYPE = {"grade1": 2, "grade2": 4, "grade3": 5, "grade4": 6, "grade5": 7}
SMOOTHNESS = {"bad": 5, "very_bad": 6, "horrible": 7, "very_horrible": 7, "impassable": 7}
UNPAVED_FROM = 4
SAC_SCALE = {
    "hiking": 1, "mountain_hiking": 2, "demanding_mountain_hiking": 3, "alpine_hiking": 4,
    "demanding_alpine_hiking": 5, "difficult_alpine_hiking": 6,
}

# Limits columns (float32 per segment, inf when untagged).
LIMIT_NAMES = ["maxheight", "maxwidth", "maxlength", "maxweight", "maxaxleload", "maxaxles"]

MPH = 1.609344
ZONE_SPEEDS = {"urban": 50, "rural": 90, "motorway": 120, "trunk": 100, "living_street": 20, "walk": 7,
               "zone30": 30, "zone20": 20, "bicycle_road": 30, "school": 30}
_NUM = re.compile(r"^\s*([0-9]+(?:[.,][0-9]+)?)\s*(.*?)\s*$")
_FEET = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(?:'|ft|feet)\s*(?:([0-9]+(?:\.[0-9]+)?)\s*(?:\"|''|in|inch|inches)?)?\s*$")


def parse_speed(value: str | None) -> float | None:
    """maxspeed value -> km/h: '50', '50 km/h', '30 mph', 'FR:urban', 'walk', 'none'; None when unparseable."""
    if not value:
        return None
    v = value.strip().lower().split(";")[0].strip()
    if v in ("none", "signals", "variable", "unlimited"):
        return 130.0 if v in ("none", "unlimited") else None
    if v == "walk":
        return 7.0
    if ":" in v and not v[0].isdigit():
        zone = v.split(":", 1)[1]
        return float(ZONE_SPEEDS[zone]) if zone in ZONE_SPEEDS else None
    m = _NUM.match(v)
    if not m:
        return None
    num = float(m.group(1).replace(",", "."))
    unit = m.group(2)
    if unit in ("mph",):
        num *= MPH
    elif unit in ("knots", "kn"):
        num *= 1.852
    elif unit not in ("", "km/h", "kmh", "kph"):
        return None
    return num if 0 < num < 400 else None


def parse_length(value: str | None) -> float | None:
    """maxheight/maxwidth/maxlength -> metres: '3.5', '3.5 m', '350 cm', "12'6\"", '12 ft 6 in'."""
    if not value:
        return None
    v = value.strip().lower()
    if v in ("none", "default", "below_default", "no_sign", "no_indications", "unsigned"):
        return None
    m = _FEET.match(v)
    if m:
        feet = float(m.group(1))
        inches = float(m.group(2)) if m.group(2) else 0.0
        return (feet * 12 + inches) * 0.0254
    m = _NUM.match(v)
    if not m:
        return None
    num = float(m.group(1).replace(",", "."))
    unit = m.group(2)
    if unit in ("", "m", "meter", "meters", "metre", "metres"):
        out = num
    elif unit == "cm":
        out = num / 100
    elif unit in ("ft", "feet"):
        out = num * 0.3048
    elif unit in ("in", "inch", "inches"):
        out = num * 0.0254
    else:
        return None
    return out if 0 < out < 100 else None


def parse_weight(value: str | None) -> float | None:
    """maxweight/maxaxleload -> tonnes: '7.5', '7.5 t', '7500 kg', '20 st' (short tons), '10000 lbs'."""
    if not value:
        return None
    v = value.strip().lower()
    m = _NUM.match(v)
    if not m:
        return None
    num = float(m.group(1).replace(",", "."))
    unit = m.group(2)
    if unit in ("", "t", "ton", "tons", "tonnes", "tonne", "mt"):
        out = num
    elif unit == "kg":
        out = num / 1000
    elif unit in ("st", "short_ton", "short tons"):
        out = num * 0.90718474
    elif unit in ("lbs", "lb"):
        out = num * 0.00045359237
    elif unit in ("cwt",):
        out = num * 0.0508
    else:
        return None
    return out if 0 < out < 1000 else None


def _access_value(v: str | None) -> int | None:
    """1 allowed, 2 destination only, 0 denied, None when not a recognised access value."""
    if v is None:
        return None
    v = v.strip().lower().split(";")[0]
    if v in ALLOW:
        return 1
    if v in DESTINATION:
        return 2
    if v in DENY:
        return 0
    return None


def mode_access(tags: dict, default_mask: int, suffix: str = "") -> tuple[int, int]:
    """(allowed mask, destination-only mask) from the access hierarchy over a class default.

    `suffix` reads directional keys (':forward' / ':backward') first; the plain keys still apply.
    """
    if _ACCESS_TAG_KEYS.isdisjoint(tags):  # most ways: no access key, so every mode takes the default
        return default_mask & _ACCESS_BITS, 0
    return _mode_access_keys(tags, default_mask, suffix)


def _mode_access_keys(tags: dict, default_mask: int, suffix: str) -> tuple[int, int]:
    """`mode_access` read key by key (what its shortcut for a way without access keys must equal)."""
    allowed = 0
    dest = 0
    for bit, keys in ACCESS_KEYS.items():
        decided = None
        for key in keys:
            val = None
            if suffix:
                val = _access_value(tags.get(key + suffix))
            if val is None:
                val = _access_value(tags.get(key))
            if val is not None:
                if val and key in GENERIC_KEYS and not default_mask & bit:
                    # access=yes / vehicle=yes do not open a footway or cycleway to cars: only a
                    # mode-specific key can grant a mode the class does not carry by default
                    decided = 0
                else:
                    decided = val
                break
        if decided is None:
            decided = 1 if default_mask & bit else 0
        if decided:
            allowed |= bit
            if decided == 2:
                dest |= bit
    return allowed, dest


def _oneway(value: str | None) -> int | None:
    """1 forward only, -1 backward only, 0 both, 2 reversible (no vehicle), None untagged."""
    if value is None:
        return None
    v = value.strip().lower()
    if v in ("yes", "true", "1"):
        return 1
    if v in ("-1", "reverse"):
        return -1
    if v in ("no", "false", "0"):
        return 0
    if v in ("reversible", "alternating"):
        return 2
    return None


def classify_way(tags: dict) -> dict | None:
    """Routing attributes of a way, or None when it is not routable.

    Returns class, flags, surface, sac, speed_fwd/bwd (km/h), access_fwd/bwd and dest_fwd/bwd
    (mode bit masks per direction), limits (six floats or None), name, ref.
    """
    hw = tags.get("highway")
    flags = 0
    if tags.get("route") == "ferry":
        cls_name = "ferry"
        flags |= F_FERRY
    elif hw in HIGHWAY_CLASS:
        cls_name = CLASS_NAMES[HIGHWAY_CLASS[hw]]
        if hw.endswith("_link"):
            flags |= F_LINK
    else:
        return None
    if tags.get("construction") not in CONSTRUCTION_OPEN or tags.get("impassable") == "yes" \
            or tags.get("status") == "impassable":
        return None  # a road under construction or declared impassable is closed to every mode
    if tags.get("area") == "yes":
        if cls_name not in ("pedestrian", "footway", "service", "living_street", "path"):
            return None
        flags |= F_AREA
    default = DEFAULT_ACCESS[cls_name]
    if tags.get("motorroad") == "yes":
        flags |= F_MOTORROAD
        default &= ~(PEDESTRIAN | BICYCLE | MOTOR_SCOOTER)
    if cls_name == "ferry" and tags.get("foot") is None and tags.get("motor_vehicle") is None:
        default = ALL_MODES
    acc_f, dest_f = mode_access(tags, default, ":forward")
    acc_b, dest_b = mode_access(tags, default, ":backward")
    if not (acc_f | acc_b):
        # Not usable by any mode (e.g. access=no with no exceptions): still keep? No: drop it.
        return None

    # oneway per mode family
    junction = tags.get("junction")
    if junction in ("roundabout", "circular"):
        flags |= F_ROUNDABOUT
    ow = _oneway(tags.get("oneway"))
    if ow is None:
        ow = 1 if (junction in ("roundabout", "circular") or hw in ("motorway", "motorway_link")) else 0
    ow_vehicle = {bit: ow for bit in (AUTO, TRUCK, BUS, MOTORCYCLE, MOTOR_SCOOTER, TAXI, BICYCLE)}
    for bit, key in ((BICYCLE, "oneway:bicycle"), (BUS, "oneway:bus"), (TAXI, "oneway:taxi"),
                     (MOTOR_SCOOTER, "oneway:moped"), (MOTORCYCLE, "oneway:motorcycle")):
        o = _oneway(tags.get(key))
        if o is not None:
            ow_vehicle[bit] = o
    if ow_vehicle[BUS] and (tags.get("oneway:psv") == "no" or tags.get("busway") == "opposite_lane"):
        ow_vehicle[BUS] = 0
    if ow_vehicle[BICYCLE] and str(tags.get("cycleway", "")).startswith("opposite"):
        ow_vehicle[BICYCLE] = 0
    ow_foot = _oneway(tags.get("oneway:foot")) or 0
    for bit, o in list(ow_vehicle.items()) + [(PEDESTRIAN, ow_foot)]:
        if o == 1:
            acc_b &= ~bit
        elif o == -1:
            acc_f &= ~bit
        elif o == 2:
            acc_f &= ~bit
            acc_b &= ~bit
    dest_f &= acc_f
    dest_b &= acc_b

    # speed
    base = DEFAULT_SPEED[cls_name]
    if flags & F_LINK:
        base = LINK_SPEED.get(cls_name, base)
    if cls_name == "ferry":
        base = DEFAULT_SPEED["ferry"]
    speed = parse_speed(tags.get("maxspeed"))
    sf = parse_speed(tags.get("maxspeed:forward")) or speed
    sb = parse_speed(tags.get("maxspeed:backward")) or speed
    if sf or sb:
        flags |= F_SPEED_TAGGED
    speed_f = sf or float(base)
    speed_b = sb or float(base)

    # surface
    surface = SURFACE.get(str(tags.get("surface", "")).split(";")[0], 0)
    if surface == 0 and cls_name == "track":
        surface = TRACKTYPE.get(tags.get("tracktype"), 5)
    smooth = SMOOTHNESS.get(tags.get("smoothness"))
    if smooth is not None and smooth > surface:
        surface = smooth
    if surface >= UNPAVED_FROM:
        flags |= F_UNPAVED

    # other flags
    if tags.get("toll") == "yes" or tags.get("toll:motorcar") == "yes":
        flags |= F_TOLL | F_TOLL_HGV
    if tags.get("toll:hgv") == "yes":
        flags |= F_TOLL_HGV
    if tags.get("tunnel") not in (None, "no"):
        flags |= F_TUNNEL
    if tags.get("bridge") not in (None, "no"):
        flags |= F_BRIDGE
    sidewalk = tags.get("sidewalk") or tags.get("sidewalk:both") or ""
    if sidewalk in ("both", "left", "right", "yes", "separate") or tags.get("sidewalk:left") == "yes" \
            or tags.get("sidewalk:right") == "yes" or tags.get("footway") in ("sidewalk", "crossing"):
        flags |= F_SIDEWALK
    if tags.get("lit") in ("yes", "24/7", "automatic", "limited", "sunset-sunrise", "interval"):
        flags |= F_LIT
    service = tags.get("service")
    if service == "alley":
        flags |= F_ALLEY
    elif service == "driveway":
        flags |= F_DRIVEWAY
    elif service == "parking_aisle":
        flags |= F_PARKING_AISLE
    elif service == "drive-through":
        flags |= F_DRIVE_THROUGH
    if tags.get("hazmat") in ("no", "destination") or any(
        k.startswith("hazmat:") and v == "no" for k, v in tags.items()
    ):
        flags |= F_HAZMAT_NO
    cw = str(tags.get("cycleway", "")) + str(tags.get("cycleway:both", "")) + str(tags.get("cycleway:right", ""))
    if any(x in cw for x in ("lane", "track", "shared_lane", "share_busway")):
        flags |= F_CYCLE_LANE

    limits = (
        parse_length(tags.get("maxheight") or tags.get("maxheight:physical")),
        parse_length(tags.get("maxwidth") or tags.get("maxwidth:physical")),
        parse_length(tags.get("maxlength")),
        parse_weight(tags.get("maxweight") or tags.get("maxweight:hgv")),
        parse_weight(tags.get("maxaxleload")),
        _parse_count(tags.get("maxaxles")),
    )
    sac = SAC_SCALE.get(tags.get("sac_scale"), 0)
    duration = parse_duration_s(tags.get("duration")) if cls_name == "ferry" else None
    return {
        "cls": CLASS[cls_name],
        "flags": flags,
        "surface": surface,
        "sac": sac,
        "speed_fwd": speed_f,
        "speed_bwd": speed_b,
        "access_fwd": acc_f,
        "access_bwd": acc_b,
        "dest_fwd": dest_f,
        "dest_bwd": dest_b,
        "limits": limits,
        "duration_s": duration,
        "name": tags.get("name") or "",
        "ref": tags.get("ref") or "",
    }


def _parse_count(value: str | None) -> float | None:
    if not value:
        return None
    try:
        n = float(value.strip())
    except ValueError:
        return None
    return n if n > 0 else None


def parse_duration_s(value: str | None) -> float | None:
    """Ferry `duration`: 'HH:MM', 'HH:MM:SS' or minutes -> seconds."""
    if not value:
        return None
    parts = value.strip().split(":")
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        return None
    if len(nums) == 1:
        secs = nums[0] * 60
    elif len(nums) == 2:
        secs = nums[0] * 3600 + nums[1] * 60
    elif len(nums) == 3:
        secs = nums[0] * 3600 + nums[1] * 60 + nums[2]
    else:
        return None
    return secs if secs > 0 else None


# --- barrier nodes: modes that can pass ------------------------------------------------------------------
BARRIER_DEFAULT = {
    "bollard": PEDESTRIAN | BICYCLE | MOTORCYCLE | MOTOR_SCOOTER,
    "block": PEDESTRIAN | BICYCLE,
    "jersey_barrier": PEDESTRIAN,
    "cycle_barrier": PEDESTRIAN | BICYCLE,
    "chain": PEDESTRIAN | BICYCLE,
    "stile": PEDESTRIAN,
    "kissing_gate": PEDESTRIAN,
    "turnstile": PEDESTRIAN,
    "full-height_turnstile": PEDESTRIAN,
    "log": PEDESTRIAN | BICYCLE,
    "bus_trap": PEDESTRIAN | BICYCLE | BUS | TRUCK,
    "sump_buster": PEDESTRIAN | BICYCLE | BUS | TRUCK,
    "gate": ALL_MODES,
    "lift_gate": ALL_MODES,
    "swing_gate": ALL_MODES,
    "sliding_gate": ALL_MODES,
    "toll_booth": ALL_MODES,
    "border_control": ALL_MODES,
    "entrance": ALL_MODES,
}


#: OSRM car.lua's obstacles (lib/obstacles.lua, car.lua process_node): seconds a car waits at a node
CAR_SIGNAL_S = 2.0  # highway=traffic_signals
CAR_STOP_S = 2.0  # highway=stop
CAR_GIVE_WAY_S = 1.0  # highway=give_way
CAR_GATE_S = 60.0  # barrier=gate or lift_gate without access tags (car.lua barrier_penalties)
_CAR_ACCESS_KEYS = ("motorcar", "motor_vehicle", "vehicle", "access")  # car.lua access_tags_hierarchy


#: what puts a way in OSRM car.lua's graph (process_way: WayHandlers access, speed, ferries)
_CAR_LUA_HIGHWAYS = frozenset((
    "motorway", "motorway_link", "trunk", "trunk_link", "primary", "primary_link", "secondary",
    "secondary_link", "tertiary", "tertiary_link", "unclassified", "residential", "living_street", "service",
    "winter_road", "ice_road"))
_CAR_LUA_WHITELIST = frozenset(("yes", "motorcar", "motor_vehicle", "vehicle", "permissive", "designated", "hov"))
_CAR_LUA_BLACKLIST = frozenset((
    "no", "agricultural", "forestry", "emergency", "psv", "taxi", "share_taxi", "minibus", "bus", "foot",
    "emergency_vehicle", "restricted", "military", "official", "customers", "private", "delivery", "destination",
    "permit", "residents"))
_CAR_LUA_RESTRICTED = frozenset(("private", "delivery", "destination", "customers", "permit", "residents", "unknown"))


def in_car_lua_graph(tags) -> bool:
    """Whether OSRM's car.lua keeps way `tags` in its graph (so that the way counts among the roads of
    a junction for its turn function, private ones included): a highway class its `speeds` table has,
    or another highway whose car access tag (motorcar, motor_vehicle, vehicle, access: the first given)
    is in its whitelist (it then gets the default speed), or a ferry or shuttle train; never a way whose
    car access is blacklisted and not merely restricted (private, destination, ...), an area, or an
    emergency-access service road."""
    get = tags.get
    hw, route = get("highway"), get("route")
    if not hw and not route:
        return False
    if get("area") == "yes":
        return False
    access = next((get(k) for k in _CAR_ACCESS_KEYS if get(k)), None)
    if access in _CAR_LUA_BLACKLIST and access not in _CAR_LUA_RESTRICTED:
        return False
    if hw == "service" and get("service") == "emergency_access":
        return False
    if route in ("ferry", "shuttle_train") or hw in _CAR_LUA_HIGHWAYS:
        return True
    return access in _CAR_LUA_WHITELIST


def car_obstacle(tags) -> tuple[float, float] | None:
    """The seconds OSRM's car.lua charges a car passing node `tags` (along the way, against it), or None:
    `highway=traffic_signals` 2 s, `highway=stop` 2 s, `highway=give_way` 1 s, each in the direction
    `traffic_signals:direction` (signals) or `direction` says (`forward`: along the way's node order,
    `backward`: against it; anything else both); a gate or lift gate 60 s both ways when the node has
    no access tag (with one, car.lua either blocks the node or lets it pass free). Not modelled: a
    minor-road stop (`stop=minor`, charged by car.lua only when entering from the slower road) is not
    charged, and a stop without a direction is charged both ways (car.lua skips it on a through road
    when the stop lies less than 20 m before the node)."""
    get = tags.get
    hw = get("highway")
    fw = bw = 0.0
    if hw in ("traffic_signals", "stop", "give_way"):
        direction = get("direction")
        if hw == "traffic_signals":
            sec = CAR_SIGNAL_S
            direction = get("traffic_signals:direction") or direction
        elif hw == "stop":
            if get("stop") == "minor":
                sec = 0.0
            else:
                sec = CAR_STOP_S
        else:
            sec = CAR_GIVE_WAY_S
        fw = sec if direction != "backward" else 0.0
        bw = sec if direction != "forward" else 0.0
    if get("barrier") in ("gate", "lift_gate") and not any(get(k) for k in _CAR_ACCESS_KEYS):
        fw += CAR_GATE_S
        bw += CAR_GATE_S
    if fw == 0.0 and bw == 0.0:
        return None
    return fw, bw


def barrier_modes(tags: dict) -> int | None:
    """Modes that can pass a barrier node (None when the node is no barrier to routing)."""
    barrier = tags.get("barrier")
    if barrier not in BARRIER_DEFAULT:
        return None
    allowed, _dest = mode_access(tags, BARRIER_DEFAULT[barrier])
    return allowed
