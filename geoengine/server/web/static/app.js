// The geoengine map page: the Protomaps basemap over the engine's own tiles, search, reverse
// geocoding, routes with turn lists and an elevation profile, isochrones. Every request goes to this
// origin and is authorised by the page session cookie the server set with the page: no key here.
import * as maplibregl from "/web/lib/maplibre-gl/maplibre-gl.mjs";

const $ = (id) => document.getElementById(id);
const state = { mode: "explore", waypoints: [], resultMarkers: [], popup: null, source: null };

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  const r = await fetch(path, { credentials: "same-origin", ...init });
  const data = r.status === 204 ? null : await r.json();
  if (!r.ok) {
    const msg = (data && (data.detail || data.title)) || `HTTP ${r.status}`;
    throw new Error(msg);
  }
  return data;
}

function status(text) { $("status").textContent = text || ""; }

function decodePolyline(str, precision = 6) {
  const factor = 10 ** precision, coords = [];
  let index = 0, lat = 0, lon = 0;
  while (index < str.length) {
    for (const which of [0, 1]) {
      let shift = 0, result = 0, byte;
      do { byte = str.charCodeAt(index++) - 63; result |= (byte & 0x1f) << shift; shift += 5; } while (byte >= 0x20);
      const delta = result & 1 ? ~(result >> 1) : result >> 1;
      if (which === 0) lat += delta; else lon += delta;
    }
    coords.push([lon / factor, lat / factor]);
  }
  return coords;
}

async function main() {
  const { sources } = await api("/sources");
  const src = sources[0];
  state.source = src;
  const [w, s, e, n] = src.bounds.split(",").map(Number);
  const [clon, clat, cz] = src.center.split(",").map(Number);
  const style = {
    version: 8,
    glyphs: `${location.origin}/web/fonts/{fontstack}/{range}.pbf`,
    sprite: `${location.origin}/web/sprites/light`,
    sources: { protomaps: { type: "vector", url: src.tilejson, attribution:
      '© <a href="https://openstreetmap.org/copyright">OpenStreetMap contributors</a>, GeoNames (CC BY 4.0), SRTM (NASA/USGS)' } },
    layers: basemaps.layers("protomaps", basemaps.namedFlavor("light"), { lang: "en" }),
  };
  const map = new maplibregl.Map({
    container: "map", style, center: [clon, clat], zoom: Math.min(cz, 13),
    maxBounds: [[w - 1, s - 1], [e + 1, n + 1]], attributionControl: false, hash: true,
  });
  window.geoengineMap = map;
  map.addControl(new maplibregl.AttributionControl({ compact: false }), "bottom-right");
  map.addControl(new maplibregl.NavigationControl(), "top-right");
  map.addControl(new maplibregl.ScaleControl(), "bottom-right");
  map.on("load", () => {
    // Overlays go under the basemap's labels, so names stay readable.
    const below = map.getStyle().layers.find((l) => l.type === "symbol")?.id;
    map.addSource("isochrone", { type: "geojson", data: { type: "FeatureCollection", features: [] } });
    map.addLayer({ id: "isochrone-fill", type: "fill", source: "isochrone", filter: ["==", ["geometry-type"], "Polygon"],
      paint: { "fill-color": ["get", "color"], "fill-opacity": 0.3 } }, below);
    map.addLayer({ id: "isochrone-line", type: "line", source: "isochrone", filter: ["==", ["geometry-type"], "Polygon"],
      paint: { "line-color": ["get", "color"], "line-width": 1.5 } }, below);
    map.addSource("routes", { type: "geojson", data: { type: "FeatureCollection", features: [] } });
    map.addLayer({ id: "route-alternates", type: "line", source: "routes", filter: ["==", ["get", "rank"], 1],
      layout: { "line-join": "round", "line-cap": "round" }, paint: { "line-color": "#7c8aa5", "line-width": 5, "line-opacity": 0.8 } }, below);
    map.addLayer({ id: "route-line", type: "line", source: "routes", filter: ["==", ["get", "rank"], 0],
      layout: { "line-join": "round", "line-cap": "round" }, paint: { "line-color": "#1d4ed8", "line-width": 6 } }, below);
    document.body.dataset.ready = "1";
  });
  map.on("click", (ev) => onClick(map, ev.lngLat));
  setupSearch(map);
  for (const input of document.querySelectorAll("input[name=mode]")) {
    input.addEventListener("change", () => { state.mode = input.value; hint(); });
  }
  $("clear").addEventListener("click", () => clearAll(map));
  for (const id of ["costing", "language", "alternates"]) {
    $(id).addEventListener("change", () => { if (state.waypoints.length >= 2) route(map); });
  }
  hint();
}

function hint() {
  $("hint").textContent = {
    explore: "Click the map to see what is there.",
    route: "Click the map to add route points (two or more).",
    isochrone: "Click the map to see what you reach in 5, 10 and 15 minutes.",
  }[state.mode];
}

function clearAll(map) {
  for (const m of state.waypoints) m.marker.remove();
  state.waypoints = [];
  map.getSource("routes")?.setData({ type: "FeatureCollection", features: [] });
  map.getSource("isochrone")?.setData({ type: "FeatureCollection", features: [] });
  $("route-panel").hidden = true;
  $("turns").replaceChildren();
  status("");
}

async function onClick(map, lngLat) {
  status("");
  if (state.mode === "explore") return reverse(map, lngLat);
  if (state.mode === "route") {
    const el = document.createElement("div");
    el.className = "waypoint";
    el.textContent = String(state.waypoints.length + 1);
    const marker = new maplibregl.Marker({ element: el }).setLngLat(lngLat).addTo(map);
    state.waypoints.push({ lon: lngLat.lng, lat: lngLat.lat, marker });
    if (state.waypoints.length >= 2) await route(map);
    return;
  }
  if (state.mode === "isochrone") return isochrone(map, lngLat);
}

async function reverse(map, lngLat) {
  try {
    const data = await api(`/search/reverse?lat=${lngLat.lat.toFixed(6)}&lon=${lngLat.lng.toFixed(6)}&size=1`);
    const r = data.results[0];
    const div = document.createElement("div");
    div.className = "reverse";
    if (r) {
      const b = document.createElement("strong");
      b.textContent = r.name || r.display_name || r.id;
      div.append(b, document.createElement("br"), `${r.display_name || ""} · ${Math.round(r.distance_m)} m`);
    } else {
      div.textContent = "Nothing indexed nearby";
    }
    state.popup?.remove();
    state.popup = new maplibregl.Popup().setLngLat(lngLat).setDOMContent(div).addTo(map);
  } catch (err) { status(`What's here: ${err.message}`); }
}

function setupSearch(map) {
  const input = $("search"), list = $("results");
  let timer = null, seq = 0;
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const q = input.value.trim();
      const mine = ++seq;
      if (q.length < 2) { list.replaceChildren(); return; }
      const c = map.getCenter();
      try {
        const places = api(`/search?q=${encodeURIComponent(q)}&lat=${c.lat.toFixed(5)}&lon=${c.lng.toFixed(5)}&size=6`);
        // a number in the query may be a house number: ask the geocoder too (Nominatim's dialect,
        // biased to the map's view), and list its addresses first
        const addresses = /\d/.test(q) ? geocode(map, q) : Promise.resolve([]);
        const [data, found] = await Promise.all([places, addresses]);
        if (mine === seq) showResults(map, mergeResults(found, data.results));
      } catch (err) { status(`Search: ${err.message}`); }
    }, 200);
  });
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && list.firstChild) list.firstChild.click();
  });
}

async function geocode(map, q) {
  const b = map.getBounds();
  const box = [b.getWest(), b.getNorth(), b.getEast(), b.getSouth()].map((v) => v.toFixed(5)).join(",");
  try {
    const rows = await api(`/search?format=jsonv2&limit=3&viewbox=${box}&q=${encodeURIComponent(q)}`);
    return rows.map((r) => ({
      name: r.name || r.display_name.split(",")[0], display_name: r.display_name, category: r.type,
      location: { lon: Number(r.lon), lat: Number(r.lat) },
    }));
  } catch (err) { return []; }  // the place search still answers
}

function mergeResults(first, rest) {
  const seen = new Set(), out = [];
  for (const r of [...first, ...rest]) {
    const k = r.display_name || r.name;
    if (!r.location || seen.has(k)) continue;
    seen.add(k);
    out.push(r);
  }
  return out.slice(0, 6);
}

function showResults(map, results) {
  const list = $("results");
  for (const m of state.resultMarkers) m.remove();
  state.resultMarkers = [];
  list.replaceChildren();
  const bounds = new maplibregl.LngLatBounds();
  for (const r of results) {
    if (!r.location) continue;
    const ll = [r.location.lon, r.location.lat];
    const li = document.createElement("li");
    li.setAttribute("role", "option");
    const small = document.createElement("small");
    small.textContent = [r.category || r.place_class, r.display_name].filter(Boolean).join(" · ");
    li.append(r.name || r.display_name || r.id, small);
    li.addEventListener("click", () => map.flyTo({ center: ll, zoom: Math.max(map.getZoom(), 15) }));
    list.append(li);
    const el = document.createElement("div");
    el.className = "result-marker";
    el.title = r.name || "";
    state.resultMarkers.push(new maplibregl.Marker({ element: el }).setLngLat(ll).addTo(map));
    bounds.extend(ll);
  }
  if (!bounds.isEmpty()) map.fitBounds(bounds, { padding: 80, maxZoom: 15, duration: 0 });
}

async function route(map) {
  const language = $("language").value;
  const body = {
    locations: state.waypoints.map(({ lon, lat }) => ({ lon, lat })),
    costing: $("costing").value,
    directions_options: { language },
  };
  if ($("alternates").checked && state.waypoints.length === 2) body.alternates = 2;
  status("Routing…");
  let doc;
  try { doc = await api("/route", body); } catch (err) { status(`Route: ${err.message}`); return; }
  status("");
  const trips = [doc.trip, ...(doc.alternates || []).map((a) => a.trip)];
  const features = trips.map((trip, i) => ({
    type: "Feature", properties: { rank: i === 0 ? 0 : 1 },
    geometry: { type: "LineString", coordinates: trip.legs.flatMap((leg) => decodePolyline(leg.shape)) },
  }));
  const mainCoords = features[0].geometry.coordinates;
  // Alternates first, so the chosen route is drawn on top.
  map.getSource("routes").setData({ type: "FeatureCollection", features: [...features].reverse() });
  const trip = doc.trip;
  const km = trip.summary.length, min = Math.round(trip.summary.time / 60);
  $("route-summary").textContent = `${km.toFixed(1)} km · ${min} min` +
    (trips.length > 1 ? ` (+${trips.length - 1} alternate${trips.length > 2 ? "s" : ""})` : "");
  const turns = $("turns");
  turns.setAttribute("dir", language.startsWith("ar") ? "rtl" : "ltr");
  turns.setAttribute("lang", language);
  turns.replaceChildren(...trip.legs.flatMap((leg) => (leg.maneuvers || []).map((m) => {
    const li = document.createElement("li");
    li.textContent = m.instruction;
    return li;
  })));
  $("route-panel").hidden = false;
  await profile(mainCoords);
}

async function profile(coords) {
  const step = Math.max(1, Math.ceil(coords.length / 500));
  const shape = coords.filter((_, i) => i % step === 0 || i === coords.length - 1).map(([lon, lat]) => ({ lat, lon }));
  let data;
  try { data = await api("/elevation", { shape, range: true }); } catch (err) { status(`Elevation: ${err.message}`); return; }
  const pts = data.range_height.filter((p) => p[1] !== null && Number.isFinite(p[1]));
  const canvas = $("profile"), ctx = canvas.getContext("2d");
  const W = canvas.width, H = canvas.height, pad = { l: 40, r: 6, t: 8, b: 18 };
  ctx.clearRect(0, 0, W, H);
  if (pts.length < 2) return;
  const dmax = pts[pts.length - 1][0] || 1;
  const hs = pts.map((p) => p[1]), hmin = Math.min(...hs), hmax = Math.max(...hs, hmin + 10);
  const x = (d) => pad.l + (d / dmax) * (W - pad.l - pad.r);
  const y = (h) => H - pad.b - ((h - hmin) / (hmax - hmin)) * (H - pad.t - pad.b);
  ctx.beginPath();
  ctx.moveTo(x(0), H - pad.b);
  for (const [d, h] of pts) ctx.lineTo(x(d), y(h));
  ctx.lineTo(x(dmax), H - pad.b);
  ctx.closePath();
  ctx.fillStyle = "rgba(29,78,216,0.25)";
  ctx.fill();
  ctx.beginPath();
  pts.forEach(([d, h], i) => (i ? ctx.lineTo(x(d), y(h)) : ctx.moveTo(x(d), y(h))));
  ctx.strokeStyle = "#1d4ed8";
  ctx.lineWidth = 1.5;
  ctx.stroke();
  ctx.fillStyle = "#333";
  ctx.font = "10px sans-serif";
  ctx.fillText(`${Math.round(hmax)} m`, 2, pad.t + 8);
  ctx.fillText(`${Math.round(hmin)} m`, 2, H - pad.b);
  ctx.fillText(`${(dmax / 1000).toFixed(1)} km`, W - 40, H - 4);
  canvas.dataset.points = String(pts.length);
}

async function isochrone(map, lngLat) {
  status("Computing reach…");
  try {
    const fc = await api("/isochrone", {
      locations: [{ lon: lngLat.lng, lat: lngLat.lat }], costing: $("costing").value,
      contours: [{ time: 5, color: "22c55e" }, { time: 10, color: "eab308" }, { time: 15, color: "ef4444" }],
      polygons: true, show_locations: false,
    });
    map.getSource("isochrone").setData(fc);
    document.body.dataset.isochrone = String(fc.features.length);
    status("");
  } catch (err) { status(`Reach: ${err.message}`); }
}

main().catch((err) => status(`The map could not start: ${err.message}`));
