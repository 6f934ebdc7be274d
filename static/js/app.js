// Toolwarden page behaviour. No inline handlers anywhere (CSP): everything is wired
// here through data attributes.
(function () {
  "use strict";

  // Theme toggle: cycles system → light → dark.
  function applyTheme(t) {
    if (t === "light" || t === "dark") document.documentElement.dataset.theme = t;
    else delete document.documentElement.dataset.theme;
    var btn = document.querySelector("[data-theme-toggle]");
    if (btn) btn.setAttribute("aria-label", "Theme: " + (t || "system"));
  }
  // Site storage may be blocked (the browser set not to let sites save data): reading
  // or writing it then throws, which must not stop the page's script. The theme then
  // still toggles, for this page only.
  function stored(key) {
    try { return localStorage.getItem(key); } catch (err) { return null; }
  }
  function store(key, value) {
    try {
      if (value) localStorage.setItem(key, value); else localStorage.removeItem(key);
    } catch (err) { /* storage unavailable: nothing is kept */ }
  }
  document.addEventListener("click", function (e) {
    var btn = e.target.closest("[data-theme-toggle]");
    if (!btn) return;
    var cur = document.documentElement.dataset.theme || "";
    var next = cur === "" ? "light" : cur === "light" ? "dark" : "";
    store("tw-theme", next);
    applyTheme(next);
  });

  // Mobile navigation toggle.
  document.addEventListener("click", function (e) {
    var btn = e.target.closest("[data-nav-toggle]");
    if (!btn) return;
    var nav = document.getElementById("app-nav");
    var open = nav.classList.toggle("open");
    btn.setAttribute("aria-expanded", open ? "true" : "false");
  });

  // Drop-down menus (<details class="menu">) and the phone's navigation close with
  // Escape, focus going back to what opened them, and a menu closes when a click lands
  // outside it or another menu opens: one open at a time.
  function closeMenus(except) {
    document.querySelectorAll("details.menu[open]").forEach(function (d) { if (d !== except) d.open = false; });
  }
  document.addEventListener("click", function (e) {
    // Not from a dialog a menu's item opened (a confirm): its menu stays, so the focus
    // can go back to the item when the dialog closes.
    if (e.target.closest("dialog")) return;
    closeMenus(e.target.closest("details.menu"));
  });
  document.addEventListener("keydown", function (e) {
    if (e.key !== "Escape") return;
    var menu = e.target.closest && e.target.closest("details.menu[open]");
    if (menu) {
      menu.open = false;
      var sum = menu.querySelector("summary");
      if (sum) sum.focus();
      e.preventDefault();
      return;
    }
    var nav = document.getElementById("app-nav");
    var btn = document.querySelector("[data-nav-toggle]");
    if (nav && btn && nav.classList.contains("open") && (nav.contains(e.target) || btn.contains(e.target))) {
      nav.classList.remove("open");
      btn.setAttribute("aria-expanded", "false");
      btn.focus();
      e.preventDefault();
    }
  });

  // The assistant's slide-over: the header's Assistant link opens it on any page but
  // /assistant itself (without JavaScript the link goes to the page); Escape closes it.
  function assistantPanel() { return document.getElementById("assistant-panel"); }
  function closeAssistant() {
    var panel = assistantPanel();
    if (!panel || panel.hidden) return;
    panel.hidden = true;
    var opener = document.querySelector("[data-assistant-open]");
    if (opener) { opener.setAttribute("aria-expanded", "false"); opener.focus(); }
  }
  document.addEventListener("click", function (e) {
    if (e.target.closest("[data-assistant-close]")) { closeAssistant(); return; }
    var opener = e.target.closest("[data-assistant-open]");
    var panel = assistantPanel();
    if (!opener || !panel || location.pathname === "/assistant" || !window.htmx) return;
    e.preventDefault();
    if (!panel.hidden) { closeAssistant(); return; }
    panel.hidden = false;
    opener.setAttribute("aria-expanded", "true");
    var body = panel.querySelector("[data-assistant-panel-body]");
    var focusInput = function () { var i = panel.querySelector("[data-assistant-form] input[name=message]"); if (i) i.focus(); };
    if (!body.dataset.loaded) {
      // Marked while on its way (no second request), and loaded only once something
      // came: a failed load (a toast says so) is tried again at the next open.
      body.dataset.loaded = "loading";
      var done = function () {
        if (body.childElementCount > 0) body.dataset.loaded = "1"; else delete body.dataset.loaded;
      };
      htmx.ajax("GET", "/assistant/panel", { target: body, swap: "innerHTML" }).then(function () { done(); focusInput(); }, done);
    } else focusInput();
  });
  document.addEventListener("keydown", function (e) {
    // Not an Escape meant for a menu, a dialog or the terminal: only one pressed in the
    // slide-over or on its opener.
    if (e.key !== "Escape" || e.defaultPrevented) return;
    var panel = assistantPanel();
    if (!panel || panel.hidden) return;
    var opener = document.querySelector("[data-assistant-open]");
    if (panel.contains(e.target) || (opener && opener.contains(e.target))) closeAssistant();
  });
  document.addEventListener("htmx:beforeRequest", function (e) {
    var form = e.target.closest && e.target.closest("[data-assistant-form]");
    var box = form && form.querySelector("input[name=message]");
    if (box) form.dataset.sent = box.value;
  });
  // After a reply: remember the conversation, empty the box, show the newest line.
  document.addEventListener("htmx:afterRequest", function (e) {
    var form = e.target.closest && e.target.closest("[data-assistant-form], [data-assistant-choice]");
    if (!form || !e.detail.successful) return;
    var chat = form.closest("[data-assistant-chat]");
    var conv = e.detail.xhr.getResponseHeader("HX-Trigger");
    var m = conv && /"conversation_id":"([^"]+)"/.exec(conv);
    if (chat && m) chat.querySelectorAll("[data-assistant-conversation]").forEach(function (i) { i.value = m[1]; });
    if (form.matches("[data-assistant-form]")) {
      // What was typed while the reply was on its way stays in the box.
      var box = form.querySelector("input[name=message]");
      if (!box || box.value === form.dataset.sent) form.reset();
    }
    if (chat) {
      // Only the newest reply's choices are open (the server refuses the others); the
      // older ones stay to be read (a list of tools is given as choices), disabled.
      var replies = chat.querySelectorAll(".assistant-msg.from-assistant");
      var last = replies[replies.length - 1];
      chat.querySelectorAll(".assistant-choices").forEach(function (c) {
        if (last && last.contains(c)) return;
        c.classList.add("spent");
        c.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
      });
      var log = chat.querySelector("[data-assistant-log]");
      if (log) log.scrollTop = log.scrollHeight;
      // The box, not a choice's hidden input of the same name.
      var input = chat.querySelector("[data-assistant-form] input[name=message]");
      if (input) input.focus();
    }
  });

  // Dialogs: [data-dialog-open="id"] opens <dialog id>, [data-dialog-close] closes its dialog.
  document.addEventListener("click", function (e) {
    var opener = e.target.closest("[data-dialog-open]");
    if (opener) {
      var d = document.getElementById(opener.dataset.dialogOpen);
      if (d && d.showModal) d.showModal();
      return;
    }
    var closer = e.target.closest("[data-dialog-close]");
    if (closer) {
      var dlg = closer.closest("dialog");
      if (dlg) dlg.close();
    }
  });
  // Dialogs marked data-open-on-load (a secret shown once) open immediately. Such a
  // value is not lost to a stray Escape: the first one brings the dialog back with a
  // warning (browsers let a page stop an Escape only after an interaction, so it is
  // reopened rather than kept); a second Escape, or Done, closes it. The page renders
  // it open but not modal (shown without script): it is made modal here, once.
  function openMarkedDialogs(root) {
    (root || document).querySelectorAll("dialog[data-open-on-load]").forEach(function (d) {
      if (d.dataset.guarded) {
        if (!d.open && d.showModal) d.showModal();
        return;
      }
      if (d.showModal) {
        if (d.open) d.close();
        d.showModal();
      }
      d.dataset.guarded = "1";
      d.addEventListener("cancel", function () { d.dataset.escaped = "1"; });
      d.addEventListener("close", function () {
        if (!d.dataset.escaped || d.dataset.warned) return;
        d.dataset.warned = "1";
        d.showModal();
        var w = document.createElement("p");
        w.className = "error";
        w.dataset.testid = "secret-dialog-warning";
        w.textContent = "This value is not shown again: copy it first. Press Escape again, or Done, to close.";
        var actions = d.querySelector(".dialog-actions");
        d.insertBefore(w, actions);
        announce(w.textContent, d);
      });
    });
  }

  // Forms with data-confirm ask first, in a real <dialog>.
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.dataset.confirm || form.dataset.confirmed === "yes") return;
    e.preventDefault();
    var d = document.getElementById("confirm-dialog");
    d.querySelector("[data-confirm-text]").textContent = form.dataset.confirm;
    var ok = d.querySelector("[data-confirm-ok]");
    var key = confirmKey(form);
    ok.onclick = function () {
      d.close();
      // A live update may have replaced the form while the dialog was open (a running
      // execution's section is redrawn at each step): submitting the detached one would
      // do nothing at all, so its replacement is submitted, or the person is told.
      var target = form.isConnected ? form : Array.prototype.find.call(
        document.querySelectorAll("form[data-confirm]"), function (f) { return confirmKey(f) === key; });
      if (!target) {
        showToast("info", "The page changed while you were deciding: that action is no longer offered here.");
        return;
      }
      // The mark lets this one submit through, and no other: a submit that left the
      // page as it was (stopped, failed, or a Back to the page kept in the browser's
      // cache) must ask again next time. requestSubmit runs the submit handlers at once.
      target.dataset.confirmed = "yes";
      try {
        target.requestSubmit ? target.requestSubmit() : target.submit();
      } finally {
        delete target.dataset.confirmed;
      }
    };
    d.showModal();
  });
  function confirmKey(f) {
    return (f.getAttribute("hx-post") || f.getAttribute("action") || "") + "\n" + f.dataset.confirm;
  }

  // Copy buttons: [data-copy="element-id"]. Where the clipboard cannot be written (a
  // page served over plain HTTP to another host has no navigator.clipboard), the text is
  // selected instead, for Ctrl+C.
  document.addEventListener("click", function (e) {
    var btn = e.target.closest("[data-copy]");
    if (!btn) return;
    var el = document.getElementById(btn.dataset.copy);
    if (!el) return;
    function say(text) {
      if (btn.dataset.copyLabel === undefined) btn.dataset.copyLabel = btn.textContent;
      btn.textContent = text;
      clearTimeout(btn.copyTimer);
      btn.copyTimer = setTimeout(function () { btn.textContent = btn.dataset.copyLabel; }, 2000);
      // The buttons' aria-label hides their changed text from screen readers.
      announce(text, btn);
    }
    function select() {
      var range = document.createRange();
      range.selectNodeContents(el);
      var sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      say("Selected: press Ctrl+C");
    }
    if (!navigator.clipboard) { select(); return; }
    navigator.clipboard.writeText(el.textContent.trim()).then(function () { say("Copied"); }, select);
  });

  // announce says text through a polite live region: the page's (#announce), or, for
  // an element in a modal dialog, one inside that dialog, since a modal dialog makes the
  // rest of the page inert and its live regions silent. It is emptied first and filled
  // a moment later, so the same words said twice are read twice.
  function announce(text, from) {
    var dlg = from && from.closest && from.closest("dialog[open]");
    var box = dlg ? dlg.querySelector("[data-announce]") : document.getElementById("announce");
    if (!box) {
      box = document.createElement("div");
      box.className = "visually-hidden";
      box.setAttribute("role", "status");
      box.dataset.announce = "";
      (dlg || document.body).appendChild(box);
    }
    box.textContent = "";
    clearTimeout(box.announceTimer);
    box.announceTimer = setTimeout(function () {
      box.textContent = text;
      box.announceTimer = setTimeout(function () { box.textContent = ""; }, 5000);
    }, 100);
  }
  // An htmx answer that swaps its notice in with the new content (a new live region is
  // not reliably read) has it said here too: HX-Trigger {"tw-announce": "text"}, fired
  // on the element that asked (htmx gives a plain value as detail.value).
  document.addEventListener("tw-announce", function (e) {
    var text = e.detail && e.detail.value;
    if (typeof text === "string" && text) announce(text, e.target);
  });

  // Tabs: [data-tabs] is a role=tablist of buttons (role=tab, aria-controls=panel id).
  // A click or Enter selects a tab; the arrow keys, Home and End move between tabs and
  // select the one reached (the ARIA tabs pattern, automatic activation).
  function selectTab(tab) {
    var list = tab.closest("[data-tabs]");
    list.querySelectorAll("[role=tab]").forEach(function (t) {
      var on = t === tab;
      t.setAttribute("aria-selected", on ? "true" : "false");
      t.tabIndex = on ? 0 : -1;
      var panel = document.getElementById(t.getAttribute("aria-controls"));
      if (panel) panel.hidden = !on;
    });
  }
  document.addEventListener("click", function (e) {
    var tab = e.target.closest("[data-tabs] [role=tab]");
    if (tab) selectTab(tab);
  });
  // The arrow keys, Home and End move along a tablist. [data-tabs] selects the tab they
  // reach; tabs that are links to pages (a tool's sections) only take the focus, and
  // Enter follows the one focused.
  document.addEventListener("keydown", function (e) {
    var tab = e.target.closest && e.target.closest("[role=tablist] [role=tab]");
    if (!tab) return;
    var tabs = Array.prototype.slice.call(tab.closest("[role=tablist]").querySelectorAll("[role=tab]"));
    var i = tabs.indexOf(tab), next = null;
    if (e.key === "ArrowRight") next = tabs[(i + 1) % tabs.length];
    else if (e.key === "ArrowLeft") next = tabs[(i - 1 + tabs.length) % tabs.length];
    else if (e.key === "Home") next = tabs[0];
    else if (e.key === "End") next = tabs[tabs.length - 1];
    if (!next) return;
    e.preventDefault();
    if (tab.closest("[data-tabs]")) selectTab(next);
    next.focus();
  });

  // A category's Edit toggle opens its edit row (CSS); the focus goes to the row's first
  // field, which follows the row's Delete button in the tab order.
  document.addEventListener("toggle", function (e) {
    var d = e.target;
    if (!d.matches || !d.matches("details.category-edit-toggle") || !d.open) return;
    var row = document.getElementById(d.querySelector("summary").getAttribute("aria-controls"));
    var field = row && row.querySelector("input, select, textarea");
    if (field) field.focus();
  }, true);

  // Toasts remove themselves after a while; they stay while hovered or focused. One that
  // asks for an action (a link: an approval's Review) or says something failed stays
  // until dismissed (its × button), or until keptToasts newer ones kept so came: an
  // agent filing thirty plans must not pile thirty up (the approvals inbox lists them
  // all). One the viewer's role hides (data-perm) is not kept. The one that says the page
  // missed live updates ([data-live-stale]) always stays (the page is out of date until
  // reloaded) and turns the header's badge to "Out of date".
  var keptToasts = 3;
  function scheduleToasts(root) {
    (root || document).querySelectorAll(".toast:not([data-scheduled]):not([data-sticky])").forEach(function (t) {
      if (t.matches("[data-live-stale]")) {
        liveStatus("stale");
        keepToast(t);
        return;
      }
      if (t.matches(".error, [role=alert]") || t.querySelector("a[href]")) {
        if (t.getClientRects().length > 0) {
          keepToast(t);
          t.dataset.kept = "";
          return;
        }
      }
      t.dataset.scheduled = "1";
      setTimeout(function remove() {
        if (t.matches(":hover, :focus-within")) { setTimeout(remove, 2000); return; }
        t.remove();
      }, 6000);
    });
    var kept = document.querySelectorAll("#toasts > .toast[data-kept]");
    for (var i = 0; i < kept.length - keptToasts; i++) {
      if (!kept[i].matches(":hover, :focus-within")) kept[i].remove();
    }
  }
  function keepToast(t) {
    t.dataset.sticky = "1";
    var x = document.createElement("button");
    x.type = "button";
    x.className = "toast-dismiss link";
    x.dataset.toastDismiss = "";
    x.setAttribute("aria-label", "Dismiss");
    x.textContent = "×";
    x.addEventListener("click", function () {
      // A focus on the × that goes moves to the next toast's, else to the main column.
      var had = t.contains(document.activeElement);
      var next = t.nextElementSibling || t.previousElementSibling;
      var to = (next && next.querySelector("[data-toast-dismiss]")) || document.getElementById("main");
      t.remove();
      if (had && to) to.focus({ preventScroll: true });
    });
    t.appendChild(x);
  }

  // showToast shows a message as the server's toasts do (LiveToast).
  function showToast(kind, message) {
    var box = document.getElementById("toasts");
    if (!box) return;
    var t = document.createElement("div");
    t.className = "toast " + kind;
    t.setAttribute("role", "status");
    t.dataset.testid = "toast";
    t.dataset.message = message; // the text without a × button's
    t.textContent = message;
    box.appendChild(t);
    scheduleToasts(box);
  }

  var leavingPage = false;
  window.addEventListener("beforeunload", function () { leavingPage = true; });
  window.addEventListener("pageshow", function () {
    leavingPage = false; // back from the cache
    document.querySelectorAll("form[data-confirmed]").forEach(function (f) { delete f.dataset.confirmed; });
  });
  // htmx 2 swaps no 4xx/5xx answer and nothing on a network failure, so a failed
  // request did nothing on screen: a toast says so. Parts that deal with their own
  // failures (the live fallback's polls, a connection test's status, the audit banner)
  // are left to it.
  var ownErrors = "[data-live-topic], .test-status[hx-get], #audit-new";
  function handlesOwnErrors(e) {
    var d = e.detail || {};
    var elt = (d.requestConfig && d.requestConfig.elt) || d.elt || e.target;
    return !!(elt && elt.matches && elt.matches(ownErrors));
  }
  // A poll that keeps failing (every second) shows its toast once, not a pile of them.
  function toastOnce(kind, message) {
    var box = document.getElementById("toasts");
    var shown = box && Array.prototype.some.call(box.querySelectorAll(".toast"), function (t) {
      return (t.dataset.message || t.textContent) === message;
    });
    if (!shown) showToast(kind, message);
  }
  // errorWords is what our error page (or the API's JSON error) says, read as text
  // from an inert parsed copy, or "" when the answer is something else.
  function errorWords(xhr) {
    var type = xhr.getResponseHeader("Content-Type") || "";
    try {
      if (type.indexOf("application/json") >= 0) {
        var j = JSON.parse(xhr.responseText);
        return j && j.error && typeof j.error.message === "string" ? j.error.message.trim() : "";
      }
      if (type.indexOf("text/plain") >= 0) { // a forward's 502: which replica did not answer
        var t = xhr.responseText.trim();
        return t.length > 300 ? t.slice(0, 299) + "…" : t;
      }
      if (type.indexOf("text/html") < 0) return "";
      var page = new DOMParser().parseFromString(xhr.responseText, "text/html").querySelector(".error-page");
      var title = page && page.querySelector("h1");
      if (!title) return "";
      var msg = title.nextElementSibling && title.nextElementSibling.matches("p") ? title.nextElementSibling.textContent.trim() : "";
      var words = title.textContent.trim();
      if (msg && msg !== words) words += ": " + msg;
      return words.length > 300 ? words.slice(0, 299) + "…" : words;
    } catch (err) {
      return "";
    }
  }
  document.addEventListener("htmx:responseError", function (e) {
    var xhr = e.detail && e.detail.xhr;
    if (!xhr || handlesOwnErrors(e)) return;
    var words = errorWords(xhr);
    toastOnce("error", words ? words + " (" + xhr.status + ")" : "That did not work (" + xhr.status + "). Reload the page and try again.");
  });
  document.addEventListener("htmx:sendError", function (e) {
    // Some browsers end the requests of a page being left with an error, not an abort.
    if (leavingPage || handlesOwnErrors(e)) return;
    toastOnce("error", "No connection to the server: check it and try again.");
  });

  // Live updates over the websocket (htmx ws extension). On every (re)connect we send
  // the topics this page wants and the id of the last event it has, so the server
  // replays whatever we missed while disconnected.
  //
  // Besides the page's own topics (data-topics on the socket's element), a part of the
  // page may follow a topic of its own while it is shown: [data-live-topic] (a test
  // run's panel). Its [data-live-since] is the last event it reflects, so the socket
  // subscribes from the older of that and the page's cursor and nothing of it is missed
  // (what is replayed twice shows the same or newer). When such a part comes or goes,
  // the socket subscribes again (a new connection: the server reads one subscription).
  var live = { wrapper: null, socket: null, retired: null, topics: [], resubscribing: false, opened: false };
  // A page that missed too many updates stays "stale" (until reloaded), whatever the
  // socket does next. A socket closed for good (gaveUp: a close the ws extension does
  // not retry) says "Offline", not "retrying".
  // The badge is no live region: a socket retrying flips it between "Connecting…" and
  // "Offline — retrying" every few seconds, for as long as the server is away. Only the
  // end of live updates is said (#announce); a page out of date is said by its toast.
  function liveStatus(state, gaveUp) {
    var s = document.getElementById("live-status");
    if (!s || s.dataset.state === "stale") return;
    if (state === "closed" && gaveUp && !s.dataset.gaveUp) {
      s.dataset.gaveUp = "1";
      announce("Live updates stopped: reload the page to see the latest.");
    } else if (state === "open") delete s.dataset.gaveUp;
    s.dataset.state = state;
    var label = s.querySelector("[data-live-label]");
    if (label) {
      label.textContent = state === "open" ? "Live" : state === "connecting" ? "Connecting…" :
        state === "stale" ? "Out of date" : gaveUp ? "Offline" : "Offline — retrying";
    }
    if (state === "stale") s.title = "This page missed live updates: reload it to see the latest.";
    else if (gaveUp) s.title = "Live updates stopped: reload the page to see the latest.";
    else s.removeAttribute("title");
  }
  function wantedTopics() {
    var root = document.querySelector("[ws-connect]");
    var topics = ((root && root.dataset.topics) || "").split(",").filter(Boolean);
    document.querySelectorAll("[data-live-topic]").forEach(function (el) {
      var t = el.dataset.liveTopic;
      if (t && topics.indexOf(t) < 0) topics.push(t);
    });
    return topics;
  }
  function subscribeFrom() {
    var cursor = document.getElementById("ws-cursor");
    var last = cursor ? Number(cursor.dataset.lastEventId || 0) : 0;
    document.querySelectorAll("[data-live-since]").forEach(function (el) {
      var since = Number(el.dataset.liveSince);
      if (since >= 0 && since < last) last = since;
    });
    return last;
  }
  function sameTopics(a, b) {
    return a.length === b.length && a.every(function (t) { return b.indexOf(t) >= 0; });
  }
  // following reports whether the open socket follows topic: asked for, and not among
  // those the server said it refused (#ws-refused, its first message when it refused any).
  function following(topic) {
    return socketOpen() && live.topics.indexOf(topic) >= 0 && !refused(topic);
  }
  function socketOpen() { return !!live.socket && live.socket.readyState === WebSocket.OPEN; }
  function refused(topic) {
    var el = document.getElementById("ws-refused");
    return ((el && el.dataset.topics) || "").split(",").indexOf(topic) >= 0;
  }
  // resubscribe reconnects an open socket whose topics are no longer what the page
  // shows; a socket that is not open subscribes to them when it opens.
  function resubscribe() {
    if (!live.wrapper || !live.socket || live.socket.readyState !== WebSocket.OPEN) return;
    if (sameTopics(wantedTopics(), live.topics)) return;
    live.retired = live.socket;
    live.socket = null;
    live.resubscribing = true;
    live.wrapper.reconnect();
  }
  // How long the page waits before it reconnects. The ws extension counts its tries
  // afresh whenever a socket opens, so a server that accepts and then closes at once
  // (1013: its database fails, a replay slot is busy) was asked again within a second,
  // by every open page, forever. Sockets that closed within quickFor of opening count
  // here too; one that stayed open longer starts the count again. The delay doubles
  // from a second up to maxDelay, a random half of it taken off (so pages spread out).
  var backoff = { quick: 0, openedAt: 0, quickFor: 10000, maxDelay: 30000 };
  if (window.htmx) {
    htmx.config.wsReconnectDelay = function (retries) {
      if (backoff.openedAt) backoff.quick = Date.now() - backoff.openedAt < backoff.quickFor ? backoff.quick + 1 : 0;
      backoff.openedAt = 0; // retries counts the handshakes that failed since
      var delay = Math.min(backoff.maxDelay, 1000 * Math.pow(2, Math.min(Math.max(retries, backoff.quick), 5)));
      return delay / 2 + Math.random() * delay / 2;
    };
  }
  document.addEventListener("htmx:wsConnecting", function () { if (!live.resubscribing) liveStatus("connecting"); });
  document.addEventListener("htmx:wsOpen", function (e) {
    backoff.openedAt = Date.now();
    selfRetries = 0;
    e.detail.event.target.__twOpened = true; // a close of it is not a refused handshake
    var topics = wantedTopics();
    var before = live.topics, reconnected = live.opened && !live.resubscribing;
    live.wrapper = e.detail.socketWrapper;
    live.socket = e.detail.event.target;
    live.topics = topics;
    live.resubscribing = false;
    live.opened = true;
    var refused = document.getElementById("ws-refused");
    if (refused) refused.dataset.topics = ""; // this socket's answer replaces the last one's
    e.detail.socketWrapper.send(JSON.stringify({ subscribe: topics, last_id: subscribeFrom() }));
    liveStatus("open");
    // After the socket dropped, a running part also asks once how it is: the replay
    // brings what it missed, unless the server no longer knows it (it restarted).
    if (reconnected) {
      document.querySelectorAll("[data-live-topic][hx-get]").forEach(function (el) {
        if (before.indexOf(el.dataset.liveTopic) >= 0) htmx.trigger(el, "tw-poll");
      });
    }
  });
  document.addEventListener("htmx:wsClose", function (e) {
    var ev = e.detail && e.detail.event;
    if (ev && ev.target && ev.target === live.retired) return; // closed to subscribe again
    if (ev && ev.target === live.socket) live.socket = null;
    live.resubscribing = false;
    var code = ev ? ev.code : 0;
    var retried = retriedCloses.indexOf(code) >= 0;
    // A proxy or load balancer going away closes with 1001, and one may close with a
    // plain 1000; the ws extension retries neither, so the page stayed offline until
    // reloaded. The page retries them itself, with the usual wait. The server's own 1000
    // (nothing the page asks for may be followed) would be refused again: not retried.
    if (!retried && ev && e.detail.socketWrapper && document.body.contains(e.target) &&
        (code === 1001 || (code === 1000 && ev.reason !== "nothing to subscribe to"))) {
      retried = true;
      var wrapper = e.detail.socketWrapper;
      setTimeout(function () {
        if (document.body.contains(e.target) && !live.socket) wrapper.reconnect();
      }, htmx.config.wsReconnectDelay(selfRetries++));
    }
    liveStatus("closed", !retried);
    // 4401: the session ended (signed out elsewhere, or disabled): go to the login page,
    // which brings a person still signed in (a new session id, after a password change in
    // another tab) back here. Not while this page is being left: a form whose answer
    // renews the session (the password change) would be cut off before its cookie.
    if (code === 4401 && !leaving) signIn();
    // 1012 after a role change, not a restart (its reason says so): see roleChanged.
    if (code === 1012 && ev.reason === roleChangedReason && !leaving) roleChanged();
    // Only an open socket hears 4401. A handshake the server refused because the session
    // ended (it expired while the computer slept and the socket was down) closes with
    // 1006, like a server that is down, and the ws extension retries 1006 forever: the
    // page asks for itself, and a redirect (to sign in) says the session is gone.
    if (code === 1006 && ev.target && !ev.target.__twOpened) probeSession();
  });
  // The close codes the ws extension reconnects after (htmx-ext-ws 2.0.4, onclose).
  var retriedCloses = [1006, 1011, 1012, 1013];
  // The server closes with 1012 when it restarts and when the person's role changed and
  // no longer allows one of the page's topics, the latter with this reason (web/ws.go,
  // closeRoleChanged: keep them in step). After a restart the page resumes; after a role
  // change it shows what the old role saw, and the ws extension's reconnect would only
  // have the lost topics dropped without a word: "Live" over parts that never update.
  // So the page loads again, as the new role sees it, unless that would lose something:
  // then it says it is out of date, with a Reload link (the badge reads "Out of date"),
  // and the socket goes on with what the new role may follow. It is loaded with a GET of
  // its address, not reload(): a page that answered a form's POST would post it again.
  var roleChangedReason = "permissions changed; resubscribe";
  function roleChanged() {
    if (!wouldLose()) {
      window.location.replace(location.pathname + location.search);
      return;
    }
    var box = document.getElementById("toasts");
    if (!box || box.querySelector("[data-role-changed]")) return;
    var t = document.createElement("div");
    t.className = "toast error";
    t.setAttribute("role", "alert");
    t.dataset.testid = "toast";
    t.dataset.liveStale = "";
    t.dataset.roleChanged = "";
    var reload = document.createElement("a");
    reload.href = location.href;
    reload.textContent = "Reload";
    reload.dataset.testid = "role-changed-reload";
    t.appendChild(document.createTextNode("Your role changed: parts of this page no longer update. "));
    t.appendChild(reload);
    t.appendChild(document.createTextNode(" to see it as your new role does (what you typed here is not kept)."));
    t.dataset.message = t.textContent;
    box.appendChild(t);
    scheduleToasts(box);
  }
  // wouldLose reports whether loading the page again would lose something: a value shown
  // once (a new token, a reset password), a form the server sent back with its errors
  // (what was typed is in it), or something typed or chosen since (typedInput).
  function wouldLose() {
    return !!document.querySelector("dialog[data-open-on-load][open], [aria-invalid=true]") || typedInput();
  }
  // typedInput reports whether a field on the page holds something the person typed or
  // chose (its value is not the one the page came with).
  function typedInput() {
    return Array.prototype.some.call(document.querySelectorAll("input, textarea, select"), function (f) {
      if (f.disabled || /^(hidden|submit|button|reset|image)$/.test(f.type)) return false;
      if (f.type === "checkbox" || f.type === "radio") return f.checked !== f.defaultChecked;
      if (f.type === "select-one") {
        // It starts on the last option marked selected, else on its first enabled one.
        var marked = -1, first = -1;
        Array.prototype.forEach.call(f.options, function (o, i) {
          if (o.defaultSelected) marked = i;
          if (first < 0 && !o.disabled) first = i;
        });
        return f.options.length > 0 && f.selectedIndex !== (marked >= 0 ? marked : first);
      }
      if (f.tagName === "SELECT") {
        return Array.prototype.some.call(f.options, function (o) { return o.selected !== o.defaultSelected; });
      }
      return f.value !== f.defaultValue;
    });
  }
  // The page's own retries (1001, 1000) in a row; an open socket starts the count again.
  var selfRetries = 0;
  function signIn() {
    window.location.assign("/login?next=" + encodeURIComponent(location.pathname + location.search));
  }
  var probing = false;
  function probeSession() {
    if (probing || leaving || !window.fetch) return;
    probing = true;
    fetch(location.pathname + location.search, { redirect: "manual", credentials: "same-origin", cache: "no-store" }).then(function (res) {
      probing = false;
      if (res.body) res.body.cancel();
      if ((res.type === "opaqueredirect" || res.status === 401) && !leaving) signIn();
    }, function () { probing = false; }); // no server: the socket keeps retrying
  }
  var leaving = false;
  window.addEventListener("beforeunload", function () { leaving = true; });
  window.addEventListener("pageshow", function () { leaving = false; }); // back from the cache
  document.addEventListener("htmx:afterSettle", resubscribe);
  document.addEventListener("htmx:wsAfterMessage", resubscribe);
  // The fallback: a running part whose topic the socket has not followed for a few
  // seconds (no websocket, or it is down) asks the server how it is (tw-poll, its
  // hx-get) once a second until the socket follows it again; one whose topic the open
  // socket was refused (a test run that another replica runs) asks at once. While the
  // socket follows the topic, nothing is asked: the server pushes.
  var followedAt = {}; // by topic: when the socket last followed it, or its part appeared
  setInterval(function () {
    var now = Date.now();
    document.querySelectorAll("[data-live-topic][hx-get]").forEach(function (el) {
      var topic = el.dataset.liveTopic;
      if (following(topic) || !(topic in followedAt)) { followedAt[topic] = now; return; }
      if (((socketOpen() && refused(topic)) || now - followedAt[topic] >= 3000) && !el.__twAsked) {
        el.__twAsked = true; // the answer replaces the element
        htmx.trigger(el, "tw-poll");
      }
    });
  }, 1000);
  document.addEventListener("htmx:afterRequest", function (e) {
    if (e.detail.elt && e.detail.elt.__twAsked && !e.detail.successful) e.detail.elt.__twAsked = false; // ask again
  });
  // A connection test's status polls itself: each answer brings the next poll. htmx
  // swaps no failed answer (an error status, no network), so one failure froze the
  // progress for good; it is asked again a second later (the server stops a test nobody
  // asks about for three seconds), and after pollTries failures in a row the panel says
  // it lost touch.
  var pollTries = 10;
  document.addEventListener("htmx:afterRequest", function (e) {
    var el = e.detail.elt;
    if (!el || !el.matches || !el.matches(".test-status[hx-get]") || e.detail.successful) return;
    el.__twFailed = (el.__twFailed || 0) + 1; // a successful poll replaces the element
    if (el.__twFailed < pollTries) {
      setTimeout(function () { if (el.isConnected) htmx.trigger(el, "tw-poll"); }, 1000);
      return;
    }
    if (el.querySelector("[data-testid=test-poll-failed]")) return;
    var note = document.createElement("span");
    note.className = "danger-text";
    note.setAttribute("role", "alert");
    note.dataset.testid = "test-poll-failed";
    note.textContent = " Could not ask the server how the test goes (" + pollTries + " tries in a row); a test nobody asks about stops by itself. Test again.";
    el.appendChild(note);
  });
  // Something written while the page was being rendered is both on the page and
  // replayed by the socket: keep the first copy of each entry of these live lists
  // (recent activity, execution history, approvals inbox, an execution's log), keyed
  // by the attribute named.
  var liveLists = [["#activity-rows", "data-audit-id"], ["#execution-rows", "id"], ["#approval-items", "id"],
    ["ol.exec-log", "data-event-id"], ["#grant-rows", "id"], ["#grant-ended-rows", "id"], ["#terminal-rows", "id"],
    ["#server-cards", "id"]];
  // Rows that say when they end (a grant's expiry) leave the list then, for the list
  // of ended ones when the page has it: the row loses its actions, and its expiry reads
  // "expired <time>" (views/collaborations.templ, endedGrantRow).
  // The times rows leave at are on the server's clock; the browser's may be minutes off,
  // which ended a grant early or left it listed. A page with them says the server's
  // time it was made at (data-server-now): the difference, measured once the page is
  // read, puts the browser's clock on the server's.
  function serverNow() {
    var el = document.querySelector("[data-server-now]");
    if (!el) return Date.now();
    if (el.__twSkew === undefined) {
      var at = Number(el.dataset.serverNow);
      el.__twSkew = isFinite(at) && at > 0 ? at - Date.now() : 0;
    }
    return Date.now() + el.__twSkew;
  }
  document.addEventListener("DOMContentLoaded", serverNow);
  setInterval(function () {
    var now = serverNow();
    document.querySelectorAll("[data-live-rows] > [data-leaves-at]").forEach(function (el) {
      if (Number(el.dataset.leavesAt) <= now) el.remove();
    });
    document.querySelectorAll("[data-live-rows] > [data-expires-at]").forEach(function (el) {
      if (Number(el.dataset.expiresAt) > now) return;
      // A keyboard user on the row's Revoke loses it with the row's actions: the focus
      // goes to the next row's (or the previous one's), else to the list's heading.
      var had = el.contains(document.activeElement);
      var list = el.parentElement, next = el.nextElementSibling, prev = el.previousElementSibling;
      var moved = expireRow(el, now);
      if (!had) return;
      var control = function (r) { return r && r.parentElement === list ? r.querySelector(controls) : null; };
      movedFocus([control(next), control(prev), list.closest("[aria-labelledby]"), document.getElementById("main")],
        moved ? "This grant expired: it is listed under the ended ones now." : "This grant expired.");
    });
  }, 1000);
  // expireRow takes an expired row out of its list, into the list of ended ones when the
  // page has it (reporting whether it did so).
  function expireRow(el, now) {
    var into = el.dataset.endedInto && document.getElementById(el.dataset.endedInto);
    if (!into) {
      el.remove();
      return false;
    }
    el.removeAttribute("data-expires-at");
    el.dataset.leavesAt = String(now + 24 * 3600 * 1000);
    el.id = el.id.replace(/^grant-/, "grant-ended-");
    el.dataset.testid = "ended-grant-row";
    el.deleteCell(el.cells.length - 1);
    var when = el.cells[el.cells.length - 1];
    when.insertBefore(document.createTextNode("expired "), when.firstChild);
    if (into.querySelector(":scope > [id='" + el.id + "']")) el.remove(); else into.prepend(el);
    return true;
  }
  function dedupeLive() {
    // A grant that ended arrives as its row in the ended list alone (one message cannot
    // carry two table parts): its active row goes then.
    document.querySelectorAll("#grant-ended-rows > tr[data-grant-id]").forEach(function (el) {
      var active = document.getElementById("grant-" + el.dataset.grantId);
      if (active) active.remove();
    });
    liveLists.forEach(function (spec) {
      document.querySelectorAll(spec[0]).forEach(function (list) {
        var seen = {};
        list.querySelectorAll("[" + spec[1] + "]").forEach(function (el) {
          var key = el.getAttribute(spec[1]);
          if (el.parentElement !== list && spec[1] === "id") return; // direct entries only
          if (seen[key]) el.remove(); else seen[key] = true;
        });
      });
    });
  }
  // One event is rendered once for every page that follows its topic (the hub's render
  // cache), so a fragment may carry parts for elements only some pages have (a server's
  // card on the list, its health table on the detail page). Drop the parts whose target
  // is not on this page before htmx swaps, instead of letting htmx report each one.
  if (window.htmx) {
    htmx.defineExtension("tw-live", {
      transformResponse: function (text) {
        var tpl = document.createElement("template");
        tpl.innerHTML = text;
        var dropped = false;
        Array.prototype.slice.call(tpl.content.children).forEach(function (el) {
          // data-live-remove: the elements its selector finds go (a deleted server's
          // tool cards); the part itself is not swapped in.
          var gone = el.getAttribute("data-live-remove");
          if (gone) {
            document.querySelectorAll(gone).forEach(function (g) { g.remove(); });
            el.remove(); dropped = true;
            return;
          }
          // data-live-if: a part that applies only where the element it names is shown
          // (a run's result replaces that run's running panel, nothing else).
          var cond = el.getAttribute("data-live-if");
          if ((el.id && !document.getElementById(el.id)) || (cond && !document.getElementById(cond))) {
            el.remove(); dropped = true;
          }
        });
        return dropped ? tpl.innerHTML : text;
      }
    });
  }
  // A live list with data-keep shows at most that many rows, the newest first: a
  // dashboard left open for days must not grow without end. A list that appends
  // (data-keep-from="start", an execution's log) drops its oldest from the start.
  // A list trimmed from its start (a live log) keeps a reader's place: the lines they
  // are reading stay where they were (overflow-anchor is off for it, so every browser
  // does the same), and its note (data-omitted-note) counts the lines gone.
  function trimLive() {
    document.querySelectorAll("[data-keep]").forEach(function (list) {
      var keep = Number(list.dataset.keep);
      var fromStart = list.dataset.keepFrom === "start";
      var removed = list.children.length - keep;
      if (removed <= 0) return;
      var anchor = fromStart && list.scrollTop > 0 ? list.children[removed] : null;
      var top = anchor ? anchor.getBoundingClientRect().top : 0;
      for (var i = 0; i < removed; i++) (fromStart ? list.firstElementChild : list.lastElementChild).remove();
      if (!fromStart) return;
      if (anchor) list.scrollTop += anchor.getBoundingClientRect().top - top;
      var note = list.dataset.omittedNote && document.getElementById(list.dataset.omittedNote);
      if (!note) return;
      var n = Number(note.dataset.count || 0) + removed;
      note.dataset.count = String(n);
      note.textContent = n === 1 ? "1 earlier line is not shown." : n + " earlier lines are not shown.";
      note.hidden = false;
    });
  }
  // A form that comes back with errors (a whole page, or a part htmx swapped in) puts
  // the focus on its first field marked invalid, unless the person already moved it.
  // A group marked invalid (a <fieldset> of radios or of a number and its unit) takes
  // no focus itself: its own invalid control takes it, else its checked radio, else its
  // first control.
  var controls = "input:not([type=hidden]):not([disabled]), select:not([disabled]), textarea:not([disabled]), button:not([disabled]), [tabindex]:not([tabindex='-1'])";
  function focusFirstInvalid(root) {
    var active = document.activeElement;
    if (active && active !== document.body && !(root !== document && root.contains(active))) return;
    var bad = root.querySelectorAll("[aria-invalid=true]");
    for (var i = 0; i < bad.length; i++) {
      var el = bad[i];
      var t = el.matches(controls) ? el : el.querySelector("[aria-invalid=true]:is(" + controls + ")") ||
        el.querySelector("input[type=radio]:checked:not([disabled])") || el.querySelector(controls);
      if (!t) continue;
      t.focus();
      if (document.activeElement === t) return;
    }
  }
  document.addEventListener("DOMContentLoaded", function () { focusFirstInvalid(document); });
  document.addEventListener("htmx:afterSettle", function (e) {
    if (e.detail && e.detail.elt && e.detail.elt.querySelector) focusFirstInvalid(e.detail.elt);
  });

  // A button marked data-reveal brings what it fills (its hx-target) into view when
  // that lands below the fold (a long form's "Test connection"); later swaps from
  // inside the panel (its polls) do not move the page.
  document.addEventListener("htmx:afterSettle", function (e) {
    var elt = e.detail && e.detail.requestConfig && e.detail.requestConfig.elt;
    if (!elt || !elt.hasAttribute || !elt.hasAttribute("data-reveal")) return;
    // Only a plain #id target: htmx's extended ones ("closest …", "this") are no selectors.
    var sel = elt.getAttribute("hx-target") || "";
    if (!/^#[A-Za-z][\w-]*$/.test(sel)) return;
    var target = document.getElementById(sel.slice(1));
    if (!target) return;
    var r = target.getBoundingClientRect();
    if (r.top < 0 || r.bottom > window.innerHeight) target.scrollIntoView({ block: "nearest" });
  });

  // A link to a page the viewer may not open (a tool card's server, for a guest) reads
  // as plain text: live fragments are rendered once for every viewer, so the page
  // takes the href off by the viewer's permissions (data-link-perm).
  function unlinkForbidden() {
    var perms = (document.body.dataset.perms || "").split(" ");
    document.querySelectorAll("a[data-link-perm][href]").forEach(function (a) {
      if (perms.indexOf(a.dataset.linkPerm) < 0) a.removeAttribute("href");
    });
  }
  document.addEventListener("DOMContentLoaded", unlinkForbidden);
  document.addEventListener("htmx:afterSettle", unlinkForbidden);

  // A live update that replaces what a person is pressing (a tool card re-rendered
  // between the button going down and coming up) would eat the click: the browser fires
  // it only when both land on one element, and the first is gone. The press is kept,
  // and a release on the link or button that took its place, the same as it, clicks it.
  var pressed = null;
  document.addEventListener("pointerdown", function (e) {
    pressed = e.button === 0 && e.target.closest ? e.target.closest("a[href], button") : null;
  }, true);
  document.addEventListener("pointerup", function (e) {
    var was = pressed;
    pressed = null;
    if (!was || was.isConnected || e.button !== 0 || !e.target.closest) return;
    var now = e.target.closest("a[href], button");
    if (now && now !== was && now.outerHTML === was.outerHTML) now.click();
  }, true);
  // Before the listener that gives back the focus a pushed fragment took (below): the
  // cards tidyQuestions removes are gone by then.
  document.addEventListener("htmx:wsAfterMessage", function () { scheduleToasts(); dedupeLive(); trimLive(); unlinkForbidden(); tidyQuestions(); });

  // A question the page showed when it loaded may arrive again over the socket (asked
  // between the page's cursor and its list): keep the first card of each.
  // A question that ended (answered elsewhere, cancelled) is removed with its marker.
  // A card removed with the focus in it (someone typing an answer) leaves the focus on
  // the nearest part still there (movedFocus), and a question that ended says so.
  function tidyQuestions() {
    var seen = {}, ended = {}, lost = null;
    document.querySelectorAll("#collaborations [data-collaboration-ended]").forEach(function (el) {
      ended[el.dataset.collaborationEnded] = true;
      el.remove();
    });
    var cards = Array.prototype.slice.call(document.querySelectorAll("#collaborations [data-collaboration-id]"));
    cards.forEach(function (el, i) {
      var id = el.dataset.collaborationId;
      // A card whose answer is on its way is left for the answer to replace.
      if (seen[id] || (ended[id] && !el.querySelector(".htmx-request"))) {
        if (el.contains(document.activeElement)) lost = { at: i, ended: !!ended[id] };
        el.remove();
      }
      seen[id] = true;
    });
    if (!lost) return;
    var left = function (c) { return c.isConnected; };
    var near = cards.slice(lost.at + 1).filter(left)[0] || cards.slice(0, lost.at).filter(left).pop();
    // The stack hides when empty (CSS): the main column it heads then.
    movedFocus([near, document.getElementById("collaborations"), document.getElementById("main")],
      lost.ended ? "This question was answered or withdrawn elsewhere." : "");
  }
  // movedFocus puts a focus that went with a removed element on the first of parts that
  // takes it (landOn), unless the person already moved it, and says why (announce).
  function movedFocus(parts, why) {
    var a = document.activeElement;
    if (!a || a === document.body) {
      for (var i = 0; i < parts.length; i++) {
        if (parts[i] && parts[i].isConnected && landOn(parts[i])) break;
      }
    }
    if (why) announce(why);
  }

  // The audit browser: every audit event names the newest entry (#audit-appended); when
  // it is newer than the top of the list, the "N new entries" banner asks the server how
  // many of them match the page's filters (its hx-get, on tw-audit-new). It asks at once,
  // then at most every auditAskEvery and never while an answer is on its way, and once
  // more for what came meanwhile: batches come every quarter second while entries are
  // written, so a wait that each one restarted (htmx's delay:) never ended, and htmx's
  // throttle: would drop the last of them, leaving the count short.
  // busy is the banner whose question is on its way, not a flag: a banner replaced while
  // it asks (its "show" brings the new list's banner) reports its answer nowhere, and a
  // flag that only that answer cleared stopped the counting for good. A banner gone, or
  // an answer older than auditAskStuck (lost without a word), asks no more.
  var auditAsk = { at: 0, asked: 0, top: null, busy: null, since: 0, timer: null }, auditAskEvery = 500, auditAskStuck = 15000;
  function askAuditNew() {
    var marker = document.getElementById("audit-appended");
    var banner = document.getElementById("audit-new");
    if (!marker || !banner || !window.htmx) return;
    if (auditAsk.busy && auditAsk.busy.isConnected && Date.now() - auditAsk.since < auditAskStuck) return;
    auditAsk.busy = null;
    // A banner with another top belongs to a list loaded again: what was asked for the
    // one before says nothing of it.
    if (banner.dataset.top !== auditAsk.top) {
      auditAsk.top = banner.dataset.top;
      auditAsk.asked = 0;
    }
    var newest = Number(marker.dataset.id || 0);
    if (newest <= Number(banner.dataset.top || 0) || newest <= auditAsk.asked) return;
    var wait = auditAsk.at + auditAskEvery - Date.now();
    if (wait > 0) {
      if (!auditAsk.timer) auditAsk.timer = setTimeout(function () { auditAsk.timer = null; askAuditNew(); }, wait);
      return;
    }
    auditAsk.at = Date.now();
    auditAsk.asked = newest;
    htmx.trigger(banner, "tw-audit-new");
  }
  document.addEventListener("htmx:wsAfterMessage", askAuditNew);
  // A banner swapped in (a new count, or the reloaded list's) asks for what came while
  // it was on its way.
  document.addEventListener("htmx:load", function (e) {
    if (e.target && e.target.id === "audit-new") askAuditNew();
  });
  // The banner that asked, not detail.elt: an answer that replaced it is reported on
  // the element around it.
  function auditBanner(e) {
    var elt = e.detail && e.detail.requestConfig && e.detail.requestConfig.elt;
    return elt && elt.id === "audit-new" ? elt : null;
  }
  document.addEventListener("htmx:beforeRequest", function (e) {
    var banner = auditBanner(e);
    if (!banner) return;
    auditAsk.busy = banner;
    auditAsk.since = Date.now();
  });
  // A banner replaced while its question is on its way (the list was loaded again) no
  // longer holds the next question back: its answer lands on the banner taken away
  // (htmx swaps nothing there) and counts for a list no longer shown. Not aborted:
  // htmx logs an aborted request as an error.
  document.addEventListener("htmx:beforeCleanupElement", function (e) {
    if (e.target && e.target === auditAsk.busy) auditAsk.busy = null;
  });
  document.addEventListener("htmx:afterRequest", function (e) {
    var banner = auditBanner(e);
    if (!banner) return;
    if (auditAsk.busy === banner) auditAsk.busy = null;
    if (!e.detail.successful) auditAsk.asked = 0; // not counted: the next entry asks again
    else askAuditNew(); // for what came while it was asking
  });
  // "… new entries · show" took its button away with the banner: the focus goes to the
  // newest entry of the list it loaded (or to the list's heading when none matches)
  // instead of falling to the page's start.
  document.addEventListener("htmx:afterSettle", function (e) {
    var elt = e.detail && e.detail.requestConfig && e.detail.requestConfig.elt;
    if (!elt || elt.id !== "audit-new-button") return;
    var active = document.activeElement;
    if (active && active !== document.body && active.isConnected) return;
    var to = document.querySelector("#audit-results [data-testid=audit-entry-link]") || document.getElementById("audit-h");
    if (to) to.focus();
  });

  // Server form: show the fields of the chosen type; add and remove env/header rows.
  function showForType() {
    var sel = document.querySelector("[data-type-select]");
    if (!sel) return;
    document.querySelectorAll("[data-for-type]").forEach(function (fs) {
      var on = fs.dataset.forType.split(" ").indexOf(sel.value) >= 0;
      fs.hidden = !on;
      fs.disabled = !on || fs.hasAttribute("data-locked");
    });
  }
  document.addEventListener("change", function (e) {
    if (e.target.matches("[data-type-select]")) showForType();
  });
  document.addEventListener("click", function (e) {
    var add = e.target.closest("[data-add-row]");
    if (add) {
      var field = add.dataset.addRow;
      var tpl = document.getElementById(field + "-row-template");
      var rows = document.getElementById(field + "-rows");
      if (!tpl || !rows) return;
      var row = tpl.content.firstElementChild.cloneNode(true);
      var n = rows.children.length + Date.now();
      // The hidden box (the row's stored name, none for a new row) has no label.
      row.querySelectorAll("input:not([type=hidden])").forEach(function (input, i) {
        input.id = field + "-new-" + n + "-" + i;
        var label = input.closest(".field").querySelector("label");
        if (label) label.htmlFor = input.id;
      });
      rows.appendChild(row);
      row.querySelector("input:not([type=hidden])").focus();
      return;
    }
    var remove = e.target.closest("[data-remove-row]");
    if (remove) {
      var r = remove.closest(".secret-row");
      var list = r.parentElement;
      var next = r.nextElementSibling || r.previousElementSibling;
      r.remove();
      // The last row gone: this list's Add (the other list's may be hidden, for the other type).
      var focusTarget = next ? next.querySelector("input:not([type=hidden])") :
        document.querySelector('[data-add-row="' + list.id.replace(/-rows$/, "") + '"]');
      if (focusTarget) focusTarget.focus();
    }
  });
  // A row's Remove says which row it removes, by the name typed in it.
  document.addEventListener("input", function (e) {
    var t = e.target;
    if (!t.matches || !t.matches(".secret-rows input[name$=_name]")) return;
    var btn = t.closest(".secret-row").querySelector("[data-remove-row]");
    var noun = t.closest(".secret-rows").dataset.noun || "row";
    if (btn) btn.setAttribute("aria-label", t.value.trim() ? "Remove " + t.value.trim() : "Remove this " + noun);
  });

  // Removals the server renders again (a test form's array item or map entry, an access
  // rule): htmx gives the focus back only to an element of the pressed button's id, so
  // removing the last row dropped it to <body>. It goes to the row that took the removed
  // one's place (the same id, renumbered), else the next row's Remove, else the
  // previous row's, else the list's Add.
  var removal = null;
  document.addEventListener("click", function (e) {
    var btn = e.target.closest && e.target.closest("button[name=_edit][value^='remove'], button[id^='access-remove-']");
    if (!btn || !btn.form) return;
    var rule = btn.id.indexOf("access-remove-") === 0;
    var row = btn.closest(rule ? "tr" : "li");
    var removeOf = function (r) {
      var b = r && r.querySelector(rule ? "button[id^='access-remove-']" : ":scope > button[name=_edit]");
      return b && b.id;
    };
    var add = rule ? document.getElementById("access-username") : row && row.parentElement.nextElementSibling;
    removal = { form: btn.form, ids: [btn.id, removeOf(row && row.nextElementSibling), removeOf(row && row.previousElementSibling),
      add && add.matches("button[name=_edit], #access-username") ? add.id : ""] };
  });
  document.addEventListener("htmx:afterSwap", function (e) {
    var cfg = e.detail && e.detail.requestConfig;
    if (!removal || !cfg || (cfg.elt !== removal.form && !removal.form.contains(cfg.elt))) return;
    var ids = removal.ids;
    removal = null;
    var a = document.activeElement;
    if (a && a !== document.body && a.isConnected) return;
    for (var i = 0; i < ids.length; i++) {
      var el = ids[i] && document.getElementById(ids[i]);
      if (!el || el.disabled) continue;
      el.focus();
      if (document.activeElement === el) return;
    }
  });
  document.addEventListener("htmx:afterRequest", function (e) {
    if (removal && e.detail && e.detail.elt === removal.form) removal = null; // refused: nothing was swapped
  });

  // A button that htmx disables while its request is in flight (hx-disabled-elt="this":
  // the server form's "Test connection") loses the focus; once htmx enables it again,
  // a focus that went nowhere comes back to it.
  document.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail && e.detail.elt;
    if (elt && elt.getAttribute && elt.getAttribute("hx-disabled-elt") === "this") elt.__twRefocus = document.activeElement === elt;
  });
  document.addEventListener("htmx:afterRequest", function (e) {
    var elt = e.detail && e.detail.elt;
    if (!elt || !elt.__twRefocus) return;
    elt.__twRefocus = false;
    var a = document.activeElement;
    if (elt.isConnected && !elt.disabled && (!a || a === document.body)) elt.focus();
  });

  // A test run that starts is said once, in the panel's live region that stays
  // (#test-announce, where the server says how it ended): the running panel has no live
  // region, so its seconds, pushed every second, are not read out each time.
  function announceRun(say) {
    var box = document.getElementById("test-announce");
    var prog = document.querySelector("#test-result[data-live-topic] .test-run-progress[id]");
    if (!box || !prog || box.dataset.run === prog.id) return;
    box.dataset.run = prog.id;
    if (say) box.textContent = "Running…";
  }
  document.addEventListener("htmx:afterSwap", function () { announceRun(true); });
  document.addEventListener("DOMContentLoaded", function () { announceRun(false); }); // a run the page opened with

  // A pushed fragment replaces whole parts of the page (htmx's oob swaps), and htmx
  // restores neither focus nor what was typed after them. What the person was doing in
  // a replaced part is kept, for elements with an id: the focus and the cursor, what
  // was typed or ticked, and which <details> were open. A field is left as the server
  // sent it when the fragment changed its own value or its form's hidden fields: a
  // phrase typed to approve one plan must not approve the plan that replaced it. A field
  // marked data-typed holds what the person typed, sent back with a refused form: its
  // text counts as typed into an empty field.
  var kept = null;
  function hiddenOf(f) {
    if (!f.form) return "";
    return Array.prototype.map.call(f.form.querySelectorAll("input[type=hidden]"),
      function (h) { return h.name + "=" + h.value; }).join("&");
  }
  // The parts (elements with an id) around the focus, innermost first: when the focused
  // element goes with no replacement (someone else decided, so the approval controls
  // or the open confirm dialog went), the focus moves to the nearest part still there.
  function anchorsOf(el) {
    var ids = [];
    for (var n = el && el.parentElement; n && n !== document.body; n = n.parentElement) {
      if (n.id) ids.push(n.id);
    }
    return ids;
  }
  // landOn focuses a part that replaced the one the focus was in: its heading when it
  // names one (aria-labelledby), else the part itself, reachable by script only until
  // the focus leaves it. It reports whether the focus got there (a hidden or inert part
  // takes none).
  function landOn(part) {
    var h = part.getAttribute("aria-labelledby") && document.getElementById(part.getAttribute("aria-labelledby"));
    var t = h && part.contains(h) ? h : part;
    var added = !t.matches("a[href], button, input, select, textarea, [tabindex]");
    if (added) t.setAttribute("tabindex", "-1");
    t.focus({ preventScroll: true });
    if (document.activeElement !== t) {
      if (added) t.removeAttribute("tabindex");
      return false;
    }
    if (added) t.addEventListener("blur", function () { t.removeAttribute("tabindex"); }, { once: true });
    return true;
  }
  document.addEventListener("htmx:wsBeforeMessage", function () {
    var a = document.activeElement;
    kept = { focus: a && a !== document.body && a.id ? a : null, fields: [], open: [],
      anchors: a && a !== document.body ? anchorsOf(a) : [], was: a && a !== document.body ? a : null };
    if (kept.focus) {
      try { kept.start = a.selectionStart; kept.end = a.selectionEnd; } catch (err) { /* not a text field */ }
    }
    document.querySelectorAll("input[id], textarea[id]").forEach(function (f) {
      var tick = f.type === "checkbox" || f.type === "radio";
      if (f.type === "hidden" || f.type === "file" || f.type === "password") return;
      var base = f.dataset.typed ? "" : f.defaultValue;
      if (tick ? f.checked === f.defaultChecked : f.value === base) return;
      kept.fields.push({ el: f, tick: tick, checked: f.checked, value: f.value, base: base, hidden: hiddenOf(f) });
    });
    document.querySelectorAll("details[id][open]").forEach(function (d) { kept.open.push(d); });
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    if (!kept) return;
    var k = kept;
    kept = null;
    var replacement = function (el) {
      if (el.isConnected) return null;
      var n = document.getElementById(el.id);
      return n && n.tagName === el.tagName && n.type === el.type ? n : null;
    };
    k.fields.forEach(function (f) {
      var n = replacement(f.el);
      if (!n || hiddenOf(n) !== f.hidden) return;
      if (f.tick) {
        if (n.defaultChecked === f.el.defaultChecked) n.checked = f.checked;
      } else if (n.defaultValue === f.base || n.defaultValue === f.el.defaultValue) {
        n.value = f.value;
      } else return;
      n.dispatchEvent(new Event(f.tick ? "change" : "input", { bubbles: true }));
    });
    k.open.forEach(function (d) {
      var n = replacement(d);
      if (n) n.open = true;
    });
    var a = document.activeElement;
    if (k.focus && (!a || a === document.body)) {
      var n = replacement(k.focus);
      if (n) {
        n.focus({ preventScroll: true });
        if (k.start != null && n.setSelectionRange) {
          try { n.setSelectionRange(k.start, k.end); } catch (err) { /* not a text field */ }
        }
      }
    }
    a = document.activeElement;
    if (k.was && !k.was.isConnected && (!a || a === document.body)) {
      for (var i = 0; i < k.anchors.length; i++) {
        var part = document.getElementById(k.anchors[i]);
        if (part && part.tagName !== "DIALOG" && landOn(part)) break;
      }
    }
  });

  // Tool list: "/" jumps to the search box; the bulk bar says how many tools are ticked.
  document.addEventListener("keydown", function (e) {
    if (e.key !== "/" || e.ctrlKey || e.metaKey || e.altKey) return;
    var t = e.target;
    if (t.closest && t.closest("input, textarea, select, [contenteditable]")) return;
    var q = document.getElementById("tool-q");
    if (!q) return;
    e.preventDefault();
    q.focus();
    q.select();
  });
  function countPicked() {
    var out = document.getElementById("bulk-count");
    if (!out) return;
    var n = document.querySelectorAll("input[form=bulk][name=id]:checked").length;
    out.textContent = n === 0 ? "Tick tools to act on several at once." : n === 1 ? "1 tool selected" : n + " tools selected";
  }
  document.addEventListener("change", function (e) {
    if (e.target.matches && e.target.matches("input[form=bulk][name=id]")) countPicked();
  });
  document.addEventListener("htmx:afterSettle", countPicked);
  document.addEventListener("htmx:wsAfterMessage", countPicked);
  // A page that comes back from a refused bulk action has tools ticked already.
  document.addEventListener("DOMContentLoaded", countPicked);

  // What htmx disables while a request is in flight (hx-disabled-elt: the test panel's
  // Run) also says it is busy, until htmx enables it again after the answer or an error.
  // Only the marks set here are taken away: the server may render a button busy itself.
  document.addEventListener("htmx:beforeSend", function () {
    document.querySelectorAll("[data-disabled-by-htmx]:not([aria-busy])").forEach(function (el) {
      el.setAttribute("aria-busy", "true");
      el.setAttribute("data-busy-by-htmx", "");
    });
  });
  document.addEventListener("htmx:afterRequest", function () {
    document.querySelectorAll("[data-busy-by-htmx]:not([data-disabled-by-htmx])").forEach(function (el) {
      el.removeAttribute("aria-busy");
      el.removeAttribute("data-busy-by-htmx");
    });
  });

  // The secret dialog first: its value is shown once, and nothing that fails after it
  // may keep it shut.
  document.addEventListener("DOMContentLoaded", function () {
    openMarkedDialogs();
    applyTheme(stored("tw-theme") || "");
    showForType();
    scheduleToasts();
  });
})();

// Execution pages (/executions/:id). A DangerZone's button stays disabled until what is
// typed equals the phrase exactly ([data-phrase-input] with data-phrase, the form's
// [data-phrase-submit]); the server checks it again. The live log keeps one line per
// event (a line both on the page and replayed by the socket shows once) and follows
// new lines when it was scrolled to the bottom.
(function () {
  "use strict";
  function syncPhrase(input) {
    var form = input.form;
    if (!form) return;
    var ok = input.value === input.dataset.phrase;
    form.querySelectorAll("[data-phrase-submit]").forEach(function (btn) { btn.disabled = !ok; });
    input.setAttribute("aria-invalid", input.value !== "" && !ok ? "true" : "false");
  }
  function syncAllPhrases() {
    document.querySelectorAll("[data-phrase-input]").forEach(syncPhrase);
  }
  document.addEventListener("input", function (e) {
    if (e.target.matches && e.target.matches("[data-phrase-input]")) syncPhrase(e.target);
  });
  // A form submitted with the phrase wrong (the button enabled by hand) is held back.
  document.addEventListener("submit", function (e) {
    var input = e.target.querySelector && e.target.querySelector("[data-phrase-input]");
    if (input && input.value !== input.dataset.phrase) {
      e.preventDefault();
      syncPhrase(input);
      input.focus();
    }
  });

  var stuck = {};
  document.addEventListener("htmx:wsBeforeMessage", function () {
    document.querySelectorAll("ol.exec-log").forEach(function (log) {
      stuck[log.id] = log.scrollHeight - log.scrollTop - log.clientHeight < 24;
    });
  });
  // Lines replayed twice are dropped by dedupeLive (above), which runs first.
  function tidyLogs() {
    document.querySelectorAll("ol.exec-log").forEach(function (log) {
      if (stuck[log.id] !== false) log.scrollTop = log.scrollHeight;
    });
  }
  document.addEventListener("htmx:wsAfterMessage", function () { syncAllPhrases(); tidyLogs(); });
  document.addEventListener("DOMContentLoaded", function () { syncAllPhrases(); tidyLogs(); });

  // A consolidated tool's form (a built-in tool with an operation): only the chosen
  // operation's parameters are shown, and the hidden ones are disabled so they are
  // neither submitted nor required. With no operation chosen, all are shown.
  function syncOperations() {
    document.querySelectorAll("[data-operation-select]").forEach(function (wrap) {
      var sel = wrap.querySelector("select");
      if (!sel) return;
      var scope = wrap.closest("form") || document;
      scope.querySelectorAll("[data-operations]").forEach(function (f) {
        var show = sel.value === "" || f.dataset.operations.split(" ").indexOf(sel.value) >= 0;
        f.hidden = !show;
        f.querySelectorAll("input, select, textarea, button").forEach(function (c) { c.disabled = !show; });
      });
    });
  }
  // Enter in one of the test panel's inputs runs the call, as Run does (when Run may be
  // pressed): the form's first submit button, which Enter would press, switches modes.
  // Enter in the "Save these arguments as a test case" fields saves the case instead:
  // someone naming a case means to keep the call, not to make it.
  function panelEnter(e) {
    if (e.key !== "Enter" || e.isComposing || e.shiftKey || e.ctrlKey || e.altKey || e.metaKey) return false;
    var t = e.target;
    return !!t.matches && t.matches(".test-run-form input:not([type=checkbox]):not([type=radio]):not([type=submit]):not([type=button])");
  }
  document.addEventListener("keydown", function (e) {
    if (!panelEnter(e)) return;
    var save = e.target.closest(".save-case");
    var button = save ? save.querySelector("[data-testid=save-case]") : e.target.form && e.target.form.querySelector(".run-button");
    e.preventDefault();
    if (button && !button.disabled) button.click();
  });
  // The browser submits a form on Enter's keypress, which a keydown called off does not
  // always stop (keys sent through the DevTools protocol, as the tests do): that
  // submission pressed the first button (Form) and its answer, queued last, undid the
  // save or the run.
  document.addEventListener("keypress", function (e) {
    if (panelEnter(e)) e.preventDefault();
  });
  // In the capture phase: before htmx reads the form for the change (the test panel
  // rates the call again, TestRisk), so it reads the new operation's inputs.
  document.addEventListener("change", function (e) {
    if (e.target.closest && e.target.closest("[data-operation-select]")) syncOperations();
  }, true);
  document.addEventListener("DOMContentLoaded", syncOperations);
  document.addEventListener("htmx:afterSwap", syncOperations);
  // The test form's choices and null boxes (views/testform.templ): only the chosen
  // variant of a oneOf/anyOf is shown, and the inputs of the other variants are
  // disabled, so they are neither sent nor checked. Behind a checked null box, text
  // inputs are read-only (still sent, so the server shows them again, but not checked:
  // the server reads null) and the other controls disabled. Without script every
  // variant shows and the server reads the chosen one only.
  function syncFormParts() {
    document.querySelectorAll(".test-form").forEach(function (form) {
      var hidden = [], nulled = [];
      form.querySelectorAll("[data-variant-of]").forEach(function (p) {
        var sel = form.querySelector('[data-variant-select="' + CSS.escape(p.dataset.variantOf) + '"]');
        var on = !sel || sel.value === p.dataset.variant;
        p.hidden = !on;
        if (!on) hidden.push(p);
      });
      form.querySelectorAll("[data-null-toggle]").forEach(function (t) {
        var region = t.closest("[data-nullable]");
        if (t.checked && region) nulled.push(region);
      });
      var within = function (list, c) {
        return list.some(function (r) {
          return r.contains(c) && !(c.matches("[data-null-toggle]") && c.closest("[data-nullable]") === r);
        });
      };
      form.querySelectorAll("input, select, textarea, button").forEach(function (c) {
        var text = c.matches("textarea, input:not([type=checkbox]):not([type=radio]):not([type=hidden]):not([type=submit]):not([type=button])");
        var isHidden = within(hidden, c), isNull = within(nulled, c);
        var off = isHidden || (isNull && !text), ro = !isHidden && isNull && text;
        if (off && !c.disabled) {
          c.disabled = true;
          c.dataset.formOff = "1";
        } else if (!off && c.dataset.formOff) {
          c.disabled = false;
          delete c.dataset.formOff;
        }
        if (ro && !c.readOnly) {
          c.readOnly = true;
          c.dataset.formRo = "1";
        } else if (!ro && c.dataset.formRo) {
          c.readOnly = false;
          delete c.dataset.formRo;
        }
      });
    });
  }
  document.addEventListener("change", function (e) {
    if (e.target.matches && e.target.matches("[data-variant-select], [data-null-toggle]")) syncFormParts();
  }, true); // before htmx reads the form, as above
  document.addEventListener("DOMContentLoaded", syncFormParts);
  document.addEventListener("htmx:afterSwap", syncFormParts);
})();

// A form posted the plain way is posted once: a second click while the first is on its
// way (a double click on "Plan it" made two plans, and a LOW one ran twice) is held back
// for a few seconds. Registered last, so a submit other handlers held back (a confirm
// dialog, a wrong phrase) does not count; htmx forms have their own guard.
(function () {
  "use strict";
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (e.defaultPrevented || !form.matches || form.matches("[hx-post]") || (form.method || "").toLowerCase() !== "post") return;
    if (form.dataset.posting === "1") {
      e.preventDefault();
      return;
    }
    form.dataset.posting = "1";
    // A form marked data-busy does its work inside the request (Run all runs every case,
    // for longer than the hold): it stays held until the answer replaces the page, and
    // its buttons say so. They are disabled after the submit, so the form's data is whole.
    if (form.dataset.busy) {
      setTimeout(function () {
        form.querySelectorAll("button[type=submit], button:not([type])").forEach(function (b) {
          b.dataset.idleLabel = b.textContent;
          b.textContent = form.dataset.busy;
          b.setAttribute("aria-busy", "true");
          b.disabled = true;
        });
      }, 0);
      return;
    }
    setTimeout(function () { delete form.dataset.posting; }, 8000);
  });
  // A long post the person stopped (Esc, a dropped network) leaves the page as it was:
  // its busy form is given back after busyHold, however long the work may take.
  var busyHold = 10 * 60 * 1000;
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (e.defaultPrevented || !form.matches || !form.dataset.busy || form.dataset.posting !== "1") return;
    setTimeout(function () {
      delete form.dataset.posting;
      form.querySelectorAll("button[data-idle-label]").forEach(function (b) {
        b.textContent = b.dataset.idleLabel;
        b.removeAttribute("aria-busy");
        b.disabled = false;
      });
    }, busyHold);
  });
  // Back to a page kept in the browser's cache: its forms may be posted again.
  window.addEventListener("pageshow", function (e) {
    if (!e.persisted) return;
    document.querySelectorAll("form[data-posting]").forEach(function (f) { delete f.dataset.posting; });
    document.querySelectorAll("form[data-busy] button[data-idle-label]").forEach(function (b) {
      b.textContent = b.dataset.idleLabel;
      delete b.dataset.idleLabel;
      b.removeAttribute("aria-busy");
      b.disabled = false;
    });
  });
})();
