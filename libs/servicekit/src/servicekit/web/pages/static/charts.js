// Charts for server-rendered pages: every element with a data-chart attribute becomes a uPlot
// chart (load uplot/uPlot.iife.min.js and uplot/uPlot.min.css before this file). No inline
// script (CSP): the data travels as JSON in the attribute. Format (servicekit README, Charts):
//   {"kind": "bars" | "line", "stacked": bool, "unit": "ms", "tz": "Etc/UTC",
//    "x": [unix seconds, ...],
//    "series": [{"label": "succeeded", "tone": "ok", "values": [number | null, ...]}, ...]}
// Tones are the kit's colour names (ok, bad, info, warn, accent, muted), read from site.css so
// the chart follows the light or dark scheme, and is drawn again when the scheme changes.
"use strict";
(function () {
  if (typeof uPlot === "undefined") return;
  var HEIGHT = 220;
  var charts = [];

  function colour(name) {
    var value = getComputedStyle(document.documentElement).getPropertyValue("--" + name).trim();
    return value || "#888888";
  }

  // Stacked bars are drawn as running totals, tallest first, each later bar over the earlier.
  function stack(series) {
    var totals = [];
    return series.map(function (s) {
      var values = s.values.map(function (v, i) {
        totals[i] = (totals[i] || 0) + (v || 0);
        return totals[i];
      });
      return { label: s.label, tone: s.tone, values: values, raw: s.values };
    }).reverse();
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  // "2026-11-23", "11-25" for day ticks, "14:00" for hour ticks (the date under midnight's),
  // date and time for the legend (`full`).
  function isoLabel(d, incr, full, first) {
    var day = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate());
    var time = pad(d.getHours()) + ":" + pad(d.getMinutes());
    if (full) return day + " " + time;
    // Day ticks: the year once, on the first (a full date on each does not fit a phone).
    if (incr >= 86400) return first ? day : day.slice(5);
    return d.getHours() === 0 && d.getMinutes() === 0 ? time + "\n" + day : time;
  }

  function options(data, width) {
    var bars = data.kind === "bars";
    var drawn = bars && data.stacked ? stack(data.series) : data.series.map(function (s) {
      return { label: s.label, tone: s.tone, values: s.values, raw: s.values };
    });
    var text = colour("text");
    var grid = colour("border");
    var tz = data.tz || "Etc/UTC";
    var axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    var zoned = function (ts) { return uPlot.tzDate(new Date(ts * 1000), tz); };
    // Times as the pages write them (ISO dates, 24-hour clock), not uPlot's US defaults.
    var xAxis = Object.assign({
      values: function (u, splits, axisIdx, space, incr) {
        return splits.map(function (ts, i) { return isoLabel(zoned(ts), incr, false, i === 0); });
      },
    }, axis);
    // Bars count things: whole-number ticks only (no "0.5 deliveries").
    var yAxis = Object.assign({ label: data.unit || "", size: 56 }, axis);
    if (bars) {
      yAxis.incrs = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 100000, 1000000];
      yAxis.values = function (u, splits) { return splits.map(function (v) { return String(v); }); };
    }
    var series = [{
      label: "Time (" + (tz === "Etc/UTC" ? "UTC" : tz) + ")",
      value: function (u, ts) { return ts == null ? "–" : isoLabel(zoned(ts), 0, true); },
    }].concat(drawn.map(function (s) {
      var tone = colour(s.tone || "accent");
      return {
        label: s.label,
        stroke: tone,
        width: bars ? 1 : 2,
        fill: bars ? tone : undefined,
        paths: bars ? uPlot.paths.bars({ size: [0.7, 48] }) : undefined,
        points: { show: !bars },
        // The legend tells each series' own value, not the running total it is drawn at.
        value: function (u, v, si, i) {
          if (i == null || s.raw[i] == null) return "–";
          return s.raw[i] + (data.unit && !bars ? " " + data.unit : "");
        },
      };
    }));
    return {
      opts: {
        width: width,
        height: HEIGHT,
        tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), tz); },
        scales: { y: { range: function (u, min, max) { return [0, max > 0 ? max * 1.1 : 1]; } } },
        axes: [xAxis, yAxis],
        series: series,
        cursor: { drag: { x: false, y: false } },
      },
      values: [data.x].concat(drawn.map(function (s) { return s.values; })),
    };
  }

  function draw(element) {
    var data;
    try {
      data = JSON.parse(element.getAttribute("data-chart"));
    } catch (error) {
      return;
    }
    element.replaceChildren();
    var built = options(data, Math.max(element.clientWidth, 240));
    var chart = new uPlot(built.opts, built.values, element);
    charts.push({ element: element, chart: chart });
  }

  function drawAll() {
    charts.forEach(function (c) { c.chart.destroy(); });
    charts = [];
    document.querySelectorAll("[data-chart]").forEach(draw);
  }

  function fit() {
    charts.forEach(function (c) {
      c.chart.setSize({ width: Math.max(c.element.clientWidth, 240), height: HEIGHT });
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", drawAll);
  else drawAll();
  window.addEventListener("resize", fit);
  if (window.matchMedia) {
    window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", drawAll);
  }
})();
