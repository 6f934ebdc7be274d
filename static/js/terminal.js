// The terminal page (/terminals/:id): xterm.js over the terminal's websocket.
// Output arrives as binary frames from an absolute index; a reconnect asks from the
// index it reached, so nothing repeats and the first connection shows the history.
// Keys go back as JSON ({type:"input"}) unless the page is read-only (the server refuses
// them from a read-only viewer anyway). The owner's page fits the terminal to its window
// and sends its size ({type:"resize"}); any other page shows the terminal at its own
// size and follows it (the server ignores a size from anyone else).
// The keyboard can always leave: Tab and Shift+Tab move the focus out of a read-only
// terminal, and out of one that takes keys after Escape (Tab alone goes to the program).
(function () {
	"use strict";
	var el = document.getElementById("terminal");
	if (!el || typeof Terminal === "undefined") {
		return;
	}
	// The page's CSP allows no inline <style>, and xterm.js keeps its dimensions and
	// theme in <style> elements it creates. On this page a "style" element is created as
	// a hidden <tw-style>, which CSP leaves alone, and its text is mirrored into a
	// constructed style sheet, which CSP does not govern either.
	var createElement = document.createElement.bind(document);
	document.createElement = function (name, options) {
		if (String(name).toLowerCase() === "style") {
			var e = createElement("tw-style", options);
			e.hidden = true;
			return e;
		}
		return createElement(name, options);
	};
	var sheets = new Map();
	function syncStyles() {
		document.querySelectorAll("tw-style").forEach(function (s) {
			var sh = sheets.get(s);
			if (!sh) {
				sh = { sheet: new CSSStyleSheet(), text: null };
				sheets.set(s, sh);
				document.adoptedStyleSheets = document.adoptedStyleSheets.concat([sh.sheet]);
			}
			if (sh.text !== s.textContent) {
				sh.text = s.textContent;
				sh.sheet.replaceSync(sh.text);
			}
		});
	}
	new MutationObserver(syncStyles).observe(document.documentElement, { subtree: true, childList: true, characterData: true });
	// xterm.js colours a cell with a 24-bit colour through setAttribute("style"), which
	// the CSP refuses. For the terminal's elements (in #terminal, or cells still being
	// built off the page) the same declarations go through the CSSOM, which CSP allows.
	var setAttribute = Element.prototype.setAttribute;
	Element.prototype.setAttribute = function (name, value) {
		if (String(name).toLowerCase() === "style" && this.style && (!this.isConnected || el.contains(this))) {
			this.style.cssText = value;
			return;
		}
		return setAttribute.call(this, name, value);
	};

	var readOnly = el.dataset.readonly === "true";
	var sizes = !readOnly && el.dataset.sizes === "true";
	// A command's output comes from pipes, not a PTY, so its lines end in a bare "\n",
	// which xterm.js takes as "down one row" without a return to the first column.
	var convertEol = el.dataset.kind === "command";
	// No keys until the server's hello says this socket takes them (setLive).
	var term = new Terminal({ cursorBlink: !readOnly, disableStdin: true, fontSize: 14, scrollback: 5000, convertEol: convertEol });
	var fit = new FitAddon.FitAddon();
	term.loadAddon(fit);
	term.open(el);
	syncStyles();
	// xterm.js cancels Tab to send it to the program, which would trap a keyboard user
	// in the terminal: where no key reaches a program (read-only), or right after Escape,
	// Tab is left to the browser, which moves the focus on.
	var escaped = false;
	term.attachCustomKeyEventHandler(function (ev) {
		if (ev.key === "Tab" && !ev.ctrlKey && !ev.altKey && !ev.metaKey && (readOnly || escaped)) {
			if (ev.type === "keydown") {
				escaped = false;
			}
			return false;
		}
		if (ev.type === "keydown" && ["Shift", "Control", "Alt", "Meta"].indexOf(ev.key) < 0) {
			escaped = ev.key === "Escape";
			if (!live && !ev.metaKey) {
				refused();
			}
		}
		return true;
	});
	if (term.textarea) {
		term.textarea.setAttribute("aria-description", readOnly
			? "Read-only. Tab and Shift+Tab leave the terminal."
			: "Tab goes to the terminal's program; press Escape, then Tab or Shift+Tab, to leave the terminal.");
	}
	if (sizes) {
		fit.fit();
	} else {
		term.resize(parseInt(el.dataset.cols, 10) || 80, parseInt(el.dataset.rows, 10) || 24);
	}
	var status = document.getElementById("terminal-status");
	function setStatus(s) {
		if (status) {
			status.textContent = s;
		}
		el.dataset.state = s;
	}

	var next = 0;
	// Output written before the page came is shown, not answered: its queries (where
	// is the cursor, what terminal is this) were asked of another terminal or of none,
	// and xterm.js's answers would be typed into whatever runs now, as this viewer.
	var replayNext = false;
	var replaying = 0;
	var ws = null;
	var retry = 500;
	// The wait before a reconnect starts again from 500 ms only after a socket stayed
	// open this long: a server that accepts and closes at once (the session's re-check
	// could not reach the database) would otherwise be asked again twice a second.
	var steady = 10000;
	var done = false;
	// Keys go only to a socket the server greeted (its hello). Without one (before it,
	// while reconnecting) the terminal takes no keys, and a key pressed then is said to
	// be lost, in the terminal itself. Keys are never kept for later: the rest of a
	// command typed while disconnected would be missing when an Enter after the
	// reconnect ran it ("rm -rf ~/" of "rm -rf ~/proj/build").
	var live = false;
	var saidRefused = false;
	function setLive(on) {
		live = on && !readOnly;
		term.options.disableStdin = !live;
		if (live) {
			saidRefused = false;
			keyed = false; // a key refused may have fired onKey without its onData
		}
	}
	function refused() {
		if (readOnly || done || saidRefused) {
			return;
		}
		saidRefused = true;
		// CAN ends an escape sequence the output left open, which would swallow the notice.
		term.write("\x18\r\n[not connected: keys not sent]\r\n");
	}
	el.addEventListener("paste", function () {
		if (!live) {
			refused();
		}
	}, true);
	function send(msg) {
		if (readOnly) {
			return;
		}
		if (live && ws && ws.readyState === WebSocket.OPEN) {
			ws.send(JSON.stringify(msg));
		} else if (msg.type === "input") {
			// The socket closing, before its close event: the same as disconnected.
			setLive(false);
			refused();
		}
	}
	function sendSize() {
		if (sizes) {
			send({ type: "resize", cols: term.cols, rows: term.rows });
		}
	}
	function reconnect() {
		setTimeout(connect, retry);
		retry = Math.min(retry * 2, 10000);
	}
	// A refused handshake does not say why: the page's own address, which answers as
	// the socket does, tells a terminal that is gone (404, or 410 when its replica
	// stopped) and an ended session (a redirect to sign in) from a network that failed.
	function probe() {
		fetch(location.pathname, { redirect: "manual", credentials: "same-origin", cache: "no-store" }).then(function (res) {
			if (res.body) {
				res.body.cancel();
			}
			if (res.type === "opaqueredirect") {
				setStatus("signed out");
				location.reload(); // the server sends the browser to sign in, and back here
			} else if (res.status === 404 || res.status === 410) {
				setStatus("gone");
			} else if (res.status === 403) {
				setStatus("no longer allowed");
			} else {
				reconnect();
			}
		}, reconnect);
	}
	function connect() {
		var proto = location.protocol === "https:" ? "wss:" : "ws:";
		var opened = false;
		var openedAt = 0;
		ws = new WebSocket(proto + "//" + location.host + el.dataset.ws + "?from=" + next);
		ws.binaryType = "arraybuffer";
		ws.onopen = function () {
			opened = true;
			openedAt = Date.now();
		};
		ws.onmessage = function (ev) {
			if (typeof ev.data !== "string") {
				var b = new Uint8Array(ev.data);
				next += b.length;
				if (replayNext) {
					replayNext = false;
					replaying++;
					term.write(b, function () {
						replaying--;
					});
					return;
				}
				term.write(b);
				return;
			}
			var m = JSON.parse(ev.data);
			if (m.type === "hello") {
				if (m.readOnly && !readOnly) {
					// Typing was taken away since the page loaded (the terminal tool disabled,
					// or refused to this person): the server refuses keys now, so say so.
					readOnly = true;
					sizes = false;
					el.dataset.readonly = "true";
					term.options.disableStdin = true;
					term.options.cursorBlink = false;
					if (status && !document.querySelector("[data-testid=terminal-readonly]")) {
						var badge = document.createElement("span");
						badge.className = "badge warn";
						badge.dataset.testid = "terminal-readonly";
						badge.textContent = "read-only";
						status.parentNode.insertBefore(badge, status);
						status.parentNode.insertBefore(document.createTextNode(" "), status);
					}
					setStatus("watching");
				}
				setLive(true); // after a read-only hello, readOnly keeps it off
				setStatus(readOnly ? "watching" : "connected");
				sendSize();
				if (next > 0 && m.at > next) {
					// CAN ends an escape sequence (CSI, OSC, DCS) the output before the gap
					// left open, which would swallow the notice.
					term.write("\x18\r\n[output was dropped while disconnected]\r\n");
				}
				next = m.at;
				replayNext = m.backlog > 0;
				if (!sizes && m.cols && m.rows) {
					term.resize(m.cols, m.rows);
				}
			} else if (m.type === "skipped") {
				// The server's buffer wrapped past what this page had read (it fell behind):
				// say so, and count on from where the output goes on. CAN ends an escape
				// sequence the lost bytes left open, so the notice shows as text.
				term.write("\x18\r\n[" + (m.at - m.from) + " bytes of output were dropped: the page could not keep up]\r\n");
				next = m.at;
			} else if (m.type === "size" && !sizes) {
				term.resize(m.cols, m.rows);
			} else if (m.type === "exit") {
				done = true;
				setStatus(m.closed ? "closed by its agent" : "ended, exit code " + m.code);
			} else if (m.type === "error") {
				setStatus(m.message);
			}
		};
		ws.onclose = function (ev) {
			setLive(false);
			if (done || ev.code === 4401 || ev.code === 4404) {
				if (!done) {
					setStatus(ev.code === 4401 ? "signed out" : "gone");
				}
				return;
			}
			setStatus("reconnecting");
			if (opened) {
				if (Date.now() - openedAt >= steady) {
					retry = 500;
				}
				reconnect();
			} else {
				probe();
			}
		};
	}
	// A paste goes in pieces: the server reads at most 64 KiB a message, and 8,000
	// characters stay under it even when every one is escaped in JSON (\uXXXX).
	// A key pressed fires onKey just before its onData; xterm.js's answers to queries
	// come without one, so while the backlog is written only those are dropped.
	// Every page that may type answers the program's queries (where is the cursor, what
	// terminal is this), and the program reads each answer as typed: only the page in
	// use answers, the one with the focus, or the owner's page shown on screen (which
	// answers while nobody has one); another tab, or an administrator watching, does not.
	var keyed = false;
	function answers() {
		return document.hasFocus() || (sizes && document.visibilityState === "visible");
	}
	term.onKey(function () {
		keyed = true;
	});
	term.onData(function (d) {
		var typed = keyed;
		keyed = false;
		if (!typed && (replaying > 0 || !answers())) {
			return; // xterm.js answering the backlog's queries, or another page's to answer
		}
		for (var i = 0; i < d.length; ) {
			var end = Math.min(i + 8000, d.length);
			var last = d.charCodeAt(end - 1);
			if (end < d.length && last >= 0xd800 && last <= 0xdbff) {
				end--; // never split a surrogate pair
			}
			send({ type: "input", data: d.slice(i, end) });
			i = end;
		}
	});
	term.onResize(sendSize);
	window.addEventListener("resize", function () {
		if (sizes) {
			fit.fit();
		}
	});
	if (!readOnly) {
		term.focus();
	}
	window.twTerminal = term;
	connect();
})();
