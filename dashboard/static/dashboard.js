// Tollgate's dashboard: progressive enhancement only. Every page works
// without this script, and the server checks every form; the script makes
// a form say what its visitor means and copies secrets.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // A choice and its fields: typing into (or ticking) a field selects the
  // choice it belongs to; choosing the other option clears those fields,
  // so that what was typed can never be silently dropped.
  const pairs = [
    { choice: "rate-limit-custom", other: "rate-limit-off", fields: ["#rate-limit-rpm"] },
    { choice: "model-access-selected", other: "model-access-all", fields: ["ul.models input[type=checkbox]"] },
    { choice: "expires-on", other: "expires-never", fields: ["#expires-at"] },
  ];
  for (const p of pairs) {
    const choice = document.getElementById(p.choice);
    const other = document.getElementById(p.other);
    if (!choice || !other) continue;
    const fields = p.fields.flatMap((sel) => Array.from(document.querySelectorAll(sel)));
    for (const f of fields) {
      const select = () => {
        if ((f.type === "checkbox" && f.checked) || (f.type !== "checkbox" && f.value !== "")) choice.checked = true;
      };
      f.addEventListener("input", select);
      f.addEventListener("change", select);
    }
    other.addEventListener("change", () => {
      if (!other.checked) return;
      for (const f of fields) {
        if (f.type === "checkbox") f.checked = false;
        else f.value = "";
      }
    });
  }

  // Copy buttons: shown only where the clipboard can be written.
  for (const b of document.querySelectorAll("button[data-copy]")) {
    const target = document.getElementById(b.dataset.copy);
    if (!target || !navigator.clipboard) continue;
    b.hidden = false;
    b.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(target.textContent);
        b.textContent = "Copied";
      } catch {
        b.textContent = "Copy failed: select the text";
      }
    });
  }

  // Times are shown in UTC, the zone usage is counted in; the visitor's
  // own local time is added beside each.
  for (const t of document.querySelectorAll("time[datetime]")) {
    const d = new Date(t.getAttribute("datetime"));
    if (isNaN(d)) continue;
    const text = d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" }) + " local time";
    if (t.dataset.local === "title") {
      t.title = (t.title ? t.title + " · " : "") + text; // a relative time: the exact ones on hover
      continue;
    }
    const local = document.createElement("span");
    local.className = "local";
    local.textContent = " (" + text + ")";
    t.append(local);
  }

  // Each cell knows its column's heading, which a phone's stacked table
  // shows beside it (see the stylesheet's narrow-screen rules).
  for (const table of document.querySelectorAll("table")) {
    const heads = Array.from(table.querySelectorAll("thead th")).map((th) => th.textContent.trim());
    for (const row of table.querySelectorAll("tbody tr")) {
      Array.from(row.children).forEach((cell, i) => {
        if (heads[i]) cell.dataset.label = heads[i];
      });
    }
  }

  // A form with errors: its summary takes the focus.
  const summary = document.getElementById("form-errors");
  if (summary) {
    summary.tabIndex = -1;
    summary.focus();
  }
});
