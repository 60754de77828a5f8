// ctxd dashboard: forms marked data-fragment are sent in the background and
// the part of the page they change is swapped in (the window preview, a
// recovered row); without this script they post and reload, and work the
// same. The key is in an HttpOnly cookie this script cannot read.
"use strict";
document.addEventListener("submit", async (ev) => {
  const form = ev.target;
  const sel = form.dataset.fragment;
  if (!sel) return;
  const target = document.querySelector(sel);
  if (!target) return;
  ev.preventDefault();
  const button = form.querySelector("button");
  if (button) button.disabled = true;
  try {
    const resp = await fetch(form.action, {
      method: "POST",
      body: new URLSearchParams(new FormData(form)),
      headers: { "X-Ctxd-Fragment": "1" },
      credentials: "same-origin",
    });
    if (!resp.ok) {
      let msg = resp.status + " " + resp.statusText;
      try { msg = (await resp.json()).error.message; } catch (_) { /* not JSON */ }
      showError(form, msg);
      return;
    }
    const html = await resp.text();
    if (form.dataset.swap === "outer") {
      target.outerHTML = html;
    } else {
      target.innerHTML = html;
    }
  } catch (err) {
    showError(form, String(err));
  } finally {
    if (button && button.isConnected) button.disabled = false;
  }
});

// showError puts the server's message next to the form, as text.
function showError(form, msg) {
  let p = form.querySelector(".flash.bad");
  if (!p) {
    p = document.createElement("p");
    p.className = "flash bad";
    p.setAttribute("role", "alert");
    form.appendChild(p);
  }
  p.textContent = msg;
}
