/*! candor-widget.js: the candor chat widget. Apache-2.0.
 *
 *   <script src="https://HOST/widget/candor-widget.js" data-api="https://HOST" defer></script>
 *
 * No framework and no build step. Optional attributes: data-title, data-greeting,
 * data-accent (a CSS colour), data-position (right | left), data-lang (en | fr),
 * data-strings (JSON that overrides any entry of the strings table below), data-open
 * (open at load), data-theme (light | dark; unset: the visitor's system setting),
 * data-suggestions (a JSON array of up to four starter questions; unset: the server's).
 * The conversation is kept in sessionStorage, so it is still there after a page load.
 * CSS custom properties on the page reach into the widget too:
 * candor-widget { --candor-accent: #7b1fa2; --candor-accent-text: #fff; --candor-font: serif }.
 *
 * Everything the API sends (answers, titles, quotes, sources) is untrusted: it is
 * rendered as text only (textContent, never innerHTML), and a source becomes a link
 * only when it is an absolute http(s) address.
 */
(() => {
  "use strict";

  const STRINGS = {
    en: {
      launcher: "Ask a question",
      title: "Ask the docs",
      greeting:
        "Hello! Ask me about these documents. I answer from them and show my sources, " +
        "or tell you when they do not say.",
      close: "Close chat",
      inputLabel: "Your question",
      placeholder: "Type your question",
      send: "Send",
      you: "You said:",
      bot: "Assistant:",
      thinking: "Reading your question…",
      warming: "Starting up: the first answer may take a little longer.",
      searching: "Searching the documents…",
      checking: "Checking the passages…",
      preparing: "Preparing the answer…",
      again: "Searching again in other words…",
      sources: "Sources",
      newTab: "(opens in a new tab)",
      feedback: "Was this helpful?",
      helpful: "Helpful",
      notHelpful: "Not helpful",
      why: "What went wrong? (optional)",
      wrong: "The answer is wrong",
      not_found: "It did not find what I need",
      incomplete: "The answer is incomplete",
      other: "Something else",
      comment: "Comment (optional)",
      sendFeedback: "Send feedback",
      thanks: "Thank you for the feedback.",
      feedbackFailed: "Your feedback could not be sent.",
      warned: "Warning",
      ended: "This conversation has ended.",
      rateLimited: "You are sending messages faster than I can answer. Please try again in {seconds} s.",
      budget: "The assistant has answered all it can for now. Please try again later.",
      unavailable: "The assistant is unavailable right now. Please try again in {seconds} s.",
      network: "Could not reach the assistant. Check your connection and try again.",
      invalid: "That message could not be sent. Please shorten or rephrase it.",
      failed: "Something went wrong. Please try again.",
      refused: "This site may not use the assistant.",
      retry: "Try again",
      reply: "New reply: {text}",
      starters: "Suggested questions",
      newChat: "New conversation",
      person: "Ask a person",
      handoffAll: "This conversation goes to the site's team with your message.",
      handoffWindow:
        "The last {minutes} minutes of this conversation go to the site's team with your message.",
      email: "Your e-mail address",
      message: "Your message",
      sendPerson: "Send to the team",
      cancel: "Cancel",
      sent: "Sent. The site's team will reply to {email}.",
      personLimited: "You have asked for a person several times already. Please try again later.",
      badEmail: "Please check your e-mail address.",
      notSent: "Your message could not be sent. Please try again.",
    },
    fr: {
      launcher: "Poser une question",
      title: "Interroger la documentation",
      greeting:
        "Bonjour ! Posez-moi une question sur ces documents. Je réponds à partir d'eux en " +
        "citant mes sources, ou je vous dis quand ils ne le disent pas.",
      close: "Fermer la discussion",
      inputLabel: "Votre question",
      placeholder: "Écrivez votre question",
      send: "Envoyer",
      you: "Vous :",
      bot: "Assistant :",
      thinking: "Lecture de votre question…",
      warming: "Démarrage en cours : la première réponse peut prendre un peu plus de temps.",
      searching: "Recherche dans les documents…",
      checking: "Vérification des passages…",
      preparing: "Préparation de la réponse…",
      again: "Nouvelle recherche avec d'autres mots…",
      sources: "Sources",
      newTab: "(s'ouvre dans un nouvel onglet)",
      feedback: "Cette réponse vous a-t-elle aidé ?",
      helpful: "Utile",
      notHelpful: "Pas utile",
      why: "Qu'est-ce qui n'allait pas ? (facultatif)",
      wrong: "La réponse est fausse",
      not_found: "Je n'ai pas trouvé ce que je cherche",
      incomplete: "La réponse est incomplète",
      other: "Autre chose",
      comment: "Commentaire (facultatif)",
      sendFeedback: "Envoyer l'avis",
      thanks: "Merci pour votre avis.",
      feedbackFailed: "Votre avis n'a pas pu être envoyé.",
      warned: "Avertissement",
      ended: "Cette conversation est terminée.",
      rateLimited:
        "Vous envoyez des messages plus vite que je ne peux répondre. Réessayez dans {seconds} s.",
      budget: "L'assistant a répondu à tout ce qu'il pouvait pour l'instant. Réessayez plus tard.",
      unavailable: "L'assistant est indisponible pour le moment. Réessayez dans {seconds} s.",
      network: "Impossible de joindre l'assistant. Vérifiez votre connexion et réessayez.",
      invalid: "Ce message n'a pas pu être envoyé. Raccourcissez-le ou reformulez-le.",
      failed: "Une erreur s'est produite. Veuillez réessayer.",
      refused: "Ce site n'est pas autorisé à utiliser l'assistant.",
      retry: "Réessayer",
      reply: "Nouvelle réponse : {text}",
      starters: "Questions suggérées",
      newChat: "Nouvelle conversation",
      person: "Contacter une personne",
      handoffAll: "Cette conversation est transmise à l'équipe du site avec votre message.",
      handoffWindow:
        "Les {minutes} dernières minutes de cette conversation sont transmises à l'équipe du site " +
        "avec votre message.",
      email: "Votre adresse e-mail",
      message: "Votre message",
      sendPerson: "Envoyer à l'équipe",
      cancel: "Annuler",
      sent: "Envoyé. L'équipe du site vous répondra à {email}.",
      personLimited: "Vous avez déjà demandé une personne plusieurs fois. Réessayez plus tard.",
      badEmail: "Vérifiez votre adresse e-mail.",
      notSent: "Votre message n'a pas pu être envoyé. Veuillez réessayer.",
    },
  };

  // A step event names the node that finished; the status line says what comes next.
  const NEXT = {
    moderate: "thinking",
    route: "searching",
    retrieve: "checking",
    grade: "preparing",
    rewrite: "again",
  };
  const REASONS = ["wrong", "not_found", "incomplete", "other"];
  const DEFAULT_RETRY_SECONDS = 10;
  // What the panel keeps for the next page: the last entries, within about 60,000
  // characters (sessionStorage holds a few megabytes per site, shared with the page).
  const MAX_SAVED = 40;
  const MAX_SAVED_CHARS = 60000;

  // The dark palette, where the page or the visitor's system asks for it (data-theme).
  const DARK = "--bg: #202124; --fg: #e8eaed; --muted: #bdc1c6; --line: #9aa0a6; --soft: #303134; " +
    "--sep: #5f6368; --code: #3c4043; --link: #a8c7fa; --warn: #3d2e12; --warn-line: #fdd663; " +
    "--err: #41201e; --err-line: #f28b82;";
  const CSS = `
:host { all: initial; --accent: var(--candor-accent, #0b57d0); --on-accent: var(--candor-accent-text, #fff);
  --bg: #fff; --fg: #1f1f1f; --muted: #474747; --line: #747775; --soft: #f1f3f4; --sep: #dadce0; --code: #e3e6e8;
  --link: #0842a0; --warn: #fff4e5; --warn-line: #b45309; --err: #fdecea; --err-line: #b3261e;
  font: 15px/1.45 var(--candor-font, system-ui, -apple-system, "Segoe UI", Roboto, sans-serif); color: var(--fg); }
@media (prefers-color-scheme: dark) { :host(:not([data-theme=light])) { ${DARK} } }
:host([data-theme=dark]) { ${DARK} }
* { box-sizing: border-box; }
[hidden] { display: none !important; }
.sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
button, textarea, input { font: inherit; color: inherit; }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.launcher { position: fixed; bottom: 20px; right: 20px; z-index: 2147483000; display: flex; align-items: center; gap: 8px;
  padding: 12px 18px; border: 0; border-radius: 999px; background: var(--accent); color: var(--on-accent);
  box-shadow: 0 4px 14px rgba(0,0,0,.25); cursor: pointer; font-weight: 600; }
.launcher:focus-visible { outline-color: var(--fg); }
.left .launcher, .left .panel { right: auto; left: 20px; }
.panel { position: fixed; bottom: 84px; right: 20px; z-index: 2147483001; width: min(380px, calc(100vw - 24px));
  height: min(560px, calc(100vh - 108px)); display: flex; flex-direction: column; background: var(--bg);
  border-radius: 14px; box-shadow: 0 10px 40px rgba(0,0,0,.3); overflow: hidden; animation: rise .18s ease-out; }
@keyframes rise { from { opacity: 0; transform: translateY(12px); } }
header { display: flex; align-items: center; gap: 4px; padding: 12px 14px;
  background: var(--accent); color: var(--on-accent); }
h2 { margin: 0 auto 0 0; font-size: 16px; }
.close { border: 0; background: transparent; color: inherit; line-height: 0; padding: 6px;
  border-radius: 6px; cursor: pointer; }
.close svg { width: 20px; height: 20px; fill: currentColor; }
.close:focus-visible { outline-color: var(--on-accent); }
.log { flex: 1; overflow-y: auto; padding: 14px; display: flex; flex-direction: column; gap: 10px; }
.msg { max-width: 88%; padding: 9px 12px; border-radius: 12px; white-space: pre-wrap; overflow-wrap: anywhere; }
.user { align-self: flex-end; background: var(--accent); color: var(--on-accent); }
.bot { align-self: flex-start; background: var(--soft); }
.warned { background: var(--warn); border: 1px solid var(--warn-line); }
.ended, .error { background: var(--err); border: 1px solid var(--err-line); }
.tag { display: block; font-weight: 700; font-size: 13px; }
.status { color: var(--muted); font-style: italic; }
.status::after { content: ""; animation: dots 1.2s steps(4) infinite; }
@keyframes dots { 0% { content: ""; } 25% { content: "."; } 50% { content: ".."; } 75% { content: "..."; } }
.sources { margin: 8px 0 0; padding: 0; list-style: none; display: flex; flex-wrap: wrap; gap: 6px; white-space: normal; }
.chip { display: inline-block; max-width: 100%; padding: 3px 9px; border: 1px solid var(--line); border-radius: 10px;
  background: var(--bg); color: var(--fg); font-size: 13px; text-decoration: none; }
a.chip { color: var(--link); border-color: var(--link); }
a.chip:hover { text-decoration: underline; }
.quote { display: -webkit-box; -webkit-box-orient: vertical; -webkit-line-clamp: 4; overflow: hidden;
  color: var(--muted); font-size: 12px; }
.num { font-weight: 700; margin-right: 4px; }
.answer code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.92em;
  background: var(--code); padding: 0 3px; border-radius: 4px; }
.row { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; margin-top: 8px; white-space: normal; }
.small { font-size: 13px; color: var(--muted); }
.btn { border: 1px solid var(--line); background: var(--bg); color: var(--fg); border-radius: 8px; padding: 4px 10px; cursor: pointer; }
.btn[aria-pressed="true"] { background: var(--accent); color: var(--on-accent); border-color: var(--accent); }
.btn svg { width: 16px; height: 16px; vertical-align: -3px; fill: currentColor; }
.starters { display: flex; flex-direction: column; align-items: flex-start; gap: 6px; }
.starters .btn { text-align: left; border-radius: 12px; }
.link { border: 0; background: none; padding: 2px 10px 8px; color: var(--link); text-decoration: underline;
  cursor: pointer; font-size: 13px; align-self: flex-start; }
.new { border: 1px solid currentColor; background: transparent; color: inherit; border-radius: 8px; padding: 3px 8px;
  font-size: 13px; cursor: pointer; }
.new:focus-visible { outline-color: var(--on-accent); }
fieldset { border: 0; margin: 8px 0 0; padding: 0; white-space: normal; }
legend { font-size: 13px; font-weight: 600; padding: 0; }
label.opt { display: block; font-size: 13px; }
.why textarea, .person textarea, .person input { width: 100%; margin-top: 4px; min-height: 48px;
  border: 1px solid var(--line); border-radius: 8px; padding: 6px; background: var(--bg); }
.person input { min-height: 0; }
.person label { display: block; margin-top: 6px; font-size: 13px; }
form.ask { display: flex; gap: 8px; padding: 10px; border-top: 1px solid var(--sep); }
form.ask textarea { flex: 1; resize: none; height: 44px; padding: 10px; border: 1px solid var(--line); border-radius: 10px;
  background: var(--bg); }
textarea:disabled { background: var(--soft); }
.send { border: 0; border-radius: 10px; padding: 0 16px; background: var(--accent); color: var(--on-accent);
  font-weight: 600; cursor: pointer; }
.send:disabled { opacity: .6; cursor: default; }
@media (prefers-reduced-motion: reduce) { * { animation: none !important; transition: none !important; } }
`;

  const THUMB =
    "M2 21h4V9H2v12zm20-11a2 2 0 0 0-2-2h-6.3l1-4.6v-.3c0-.4-.2-.8-.4-1.1L13.2 1 6.6 7.6" +
    "c-.4.3-.6.8-.6 1.4v10a2 2 0 0 0 2 2h9c.8 0 1.5-.5 1.8-1.2l3-7.1c.1-.2.2-.5.2-.7v-2z";

  const CROSS = "M19 6.4 17.6 5 12 10.6 6.4 5 5 6.4 10.6 12 5 17.6 6.4 19 12 13.4 17.6 19 19 17.6 13.4 12z";

  const script =
    document.currentScript || document.querySelector('script[src*="candor-widget"]');
  const data = (script && script.dataset) || {};
  const api = (data.api || (script ? new URL(script.src, location.href).origin : location.origin))
    .replace(/\/+$/, "");
  const lang = STRINGS[data.lang] ? data.lang : "en";
  const text = Object.assign({}, STRINGS.en, STRINGS[lang], overrides());
  if (data.title) text.title = data.title;
  if (data.greeting) text.greeting = data.greeting;
  const sessionKey = "candor-session " + api;
  let streaming = data.stream !== "off";

  function overrides() {
    try {
      return data.strings ? JSON.parse(data.strings) : {};
    } catch (error) {
      return {};
    }
  }

  function t(key, values) {
    return String(text[key] || "").replace(/\{(\w+)\}/g, (_, name) => String(values[name]));
  }

  // Elements are built from parts, so that no string is ever parsed as HTML.
  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value !== null && value !== undefined) node.setAttribute(name, value);
    }
    for (const child of children || []) {
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function icon(d, turn) {
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("aria-hidden", "true");
    const path = document.createElementNS(ns, "path");
    path.setAttribute("d", d);
    if (turn) path.setAttribute("transform", "rotate(180 12 12)");
    svg.append(path);
    return svg;
  }

  // Only an absolute http(s) address becomes a link: never javascript:, data: or a path.
  function safeUrl(value) {
    try {
      const url = new URL(String(value));
      return url.protocol === "https:" || url.protocol === "http:" ? url.href : null;
    } catch (error) {
      return null;
    }
  }

  function storedSession() {
    try {
      return sessionStorage.getItem(sessionKey);
    } catch (error) {
      return null;
    }
  }

  function storeSession(id) {
    try {
      if (id) sessionStorage.setItem(sessionKey, id);
      else sessionStorage.removeItem(sessionKey);
    } catch (error) {
      /* storage refused (private mode, sandbox): the session lasts this page only */
    }
    session = id;
  }

  let session = storedSession();

  // The conversation as shown: questions, replies with their sources and ratings,
  // and notes, restored when the visitor opens another page of the site.
  const logKey = "candor-log " + api;
  let saved = loadLog();

  function loadLog() {
    try {
      const value = JSON.parse(sessionStorage.getItem(logKey));
      return Array.isArray(value) ? value : [];
    } catch (error) {
      return [];
    }
  }

  function saveLog() {
    while (saved.length > MAX_SAVED ||
      (saved.length > 2 && JSON.stringify(saved).length > MAX_SAVED_CHARS)) saved.shift();
    try {
      if (saved.length) sessionStorage.setItem(logKey, JSON.stringify(saved));
      else sessionStorage.removeItem(logKey);
    } catch (error) {
      /* storage refused or full: this page still shows it */
    }
  }

  function ownSuggestions() {
    try {
      const list = JSON.parse(data.suggestions || "null");
      return Array.isArray(list) ? list.map(String) : null;
    } catch (error) {
      return null;
    }
  }

  // The widget's own element; its shadow root keeps the page's styles out and ours in.
  const host = document.createElement("candor-widget");
  if (data.accent) host.style.setProperty("--candor-accent", data.accent);
  if (data.theme === "dark" || data.theme === "light") host.dataset.theme = data.theme;
  const root = host.attachShadow({ mode: "open" });
  if (root.adoptedStyleSheets !== undefined && window.CSSStyleSheet) {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(CSS);
    root.adoptedStyleSheets = [sheet];
  } else {
    root.append(el("style", {}, [CSS]));
  }

  const announcer = el("div", { class: "sr", role: "status", "aria-live": "polite" });
  const launcher = el("button", { class: "launcher", type: "button", "aria-expanded": "false",
    "aria-controls": "candor-panel", "aria-haspopup": "dialog" }, [text.launcher]);
  const titleEl = el("h2", { id: "candor-title" }, [text.title]);
  const closeButton = el("button", { class: "close", type: "button", "aria-label": text.close },
    [icon(CROSS)]);
  const newButton = el("button", { class: "new", type: "button" }, [text.newChat]);
  const personLink = el("button", { class: "link", type: "button", hidden: "" }, [text.person]);
  const log = el("div", { class: "log" });
  const input = el("textarea", { id: "candor-input", rows: "1", maxlength: "1000",
    placeholder: text.placeholder, autocomplete: "off" });
  const sendButton = el("button", { class: "send", type: "submit" }, [text.send]);
  const form = el("form", { class: "ask" }, [
    el("label", { class: "sr", for: "candor-input" }, [text.inputLabel]), input, sendButton,
  ]);
  const panel = el("div", { id: "candor-panel", class: "panel", role: "dialog",
    "aria-labelledby": "candor-title", hidden: "" }, [
    el("header", {}, [titleEl, newButton, closeButton]), log, form, personLink,
  ]);
  const frame = el("div", { class: data.position === "left" ? "left" : "right" },
    [launcher, panel, announcer]);
  root.append(frame);

  let returnFocus = null;
  let busy = false;
  let ended = false;
  let lastQuestion = "";
  let starters = null;
  let personForm = null;
  // What the server offers (GET /widget/config), asked once the panel first opens.
  let config = { suggestions: [], handoff: {} };

  function open() {
    returnFocus = root.activeElement || document.activeElement;
    panel.hidden = false;
    launcher.setAttribute("aria-expanded", "true");
    input.focus();
    if (!warmChecked) {
      warmChecked = true;
      watchWarmup(null);
      loadConfig();
    }
  }

  async function loadConfig() {
    try {
      const response = await fetch(api + "/widget/config", { credentials: "omit" });
      if (response.ok) config = await response.json();
    } catch (error) {
      /* no starters and no hand-off: the chat itself still works */
    }
    config.suggestions = ownSuggestions() || config.suggestions || [];
    config.handoff = config.handoff || {};
    showStarters();
    if (config.handoff.enabled) {
      personLink.hidden = false;
      log.querySelectorAll("[data-decision=declined]").forEach(offerPerson);
    }
  }

  // Up to four questions to start with, while nothing has been asked.
  function showStarters() {
    if (starters) starters.remove();
    starters = null;
    const list = (config.suggestions || []).slice(0, 4);
    if (saved.length || !list.length) return;
    starters = el("div", { class: "starters", role: "group", "aria-label": text.starters },
      list.map((question) => {
        const button = el("button", { class: "btn", type: "button" }, [question]);
        button.addEventListener("click", () => {
          if (!busy && !ended) ask(question);
        });
        return button;
      }));
    log.append(starters);
  }

  function restart() {
    if (busy) return;
    storeSession(null);
    saved = [];
    saveLog();
    personForm = null;
    log.replaceChildren(botBubble([text.greeting]));
    ended = false;
    input.disabled = false;
    sendButton.disabled = false;
    lastQuestion = "";
    showStarters();
    input.focus();
    announce(text.newChat);
  }

  // A server that has just started loads its models first; GET /health says
  // `warming` (503) meanwhile. The panel says so until it is ready: a question
  // asked now still gets its answer, later than the next ones. Asked once the panel
  // first opens, so a page whose visitors never open it costs the API nothing.
  let warmChecked = false;
  async function watchWarmup(note) {
    let response;
    let body = {};
    try {
      response = await fetch(api + "/health", { credentials: "omit" });
      body = await response.json();
    } catch (error) {
      if (note) note.remove();
      return; /* no answer or not JSON: say nothing, the questions will tell */
    }
    if (response.status !== 503 || body.status !== "warming") {
      if (note) note.remove();
      return;
    }
    if (!note) {
      note = el("p", { class: "small warming", role: "status" }, [text.warming]);
      log.append(note);
    }
    const wait = Math.min(Math.max(Number(response.headers.get("retry-after")) || 2, 1), 10);
    setTimeout(() => watchWarmup(note), wait * 1000);
  }

  function close() {
    panel.hidden = true;
    launcher.setAttribute("aria-expanded", "false");
    const target = returnFocus && returnFocus.isConnected ? returnFocus : launcher;
    target.focus();
  }

  launcher.addEventListener("click", () => (panel.hidden ? open() : close()));
  closeButton.addEventListener("click", close);
  newButton.addEventListener("click", restart);
  personLink.addEventListener("click", () => openPerson(lastQuestion));
  panel.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      close();
    }
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const question = input.value.trim();
    if (!question || busy || ended) return;
    input.value = "";
    ask(question);
  });

  function announce(message) {
    announcer.textContent = "";
    setTimeout(() => (announcer.textContent = message), 50);
  }

  function botBubble(children) {
    return el("div", { class: "msg bot" }, [el("span", { class: "sr" }, [text.bot + " "]),
      ...children]);
  }

  function scrollDown() {
    log.scrollTop = log.scrollHeight;
  }

  function setBusy(value) {
    busy = value;
    sendButton.disabled = value || ended;
    log.setAttribute("aria-busy", String(value));
  }

  function endConversation() {
    ended = true;
    input.disabled = true;
    sendButton.disabled = true;
  }

  // One bot reply: a status line while it works, the answer text, then what follows it.
  function newReply(question) {
    const status = el("span", { class: "status" }, [text.thinking]);
    const body = el("span", { class: "answer" });
    const bubble = botBubble([status, body]);
    log.append(bubble);
    scrollDown();
    const reply = {
      bubble,
      question,
      streamed: "", // the answer's text so far, as the `token` events brought it
      status: (key) => {
        status.hidden = !key;
        status.textContent = key ? text[key] : "";
      },
      reset: () => {
        bubble.className = "msg bot";
        delete bubble.dataset.decision;
        bubble.replaceChildren(bubble.firstChild, status, body);
        body.textContent = "";
        reply.streamed = "";
        status.hidden = false;
        status.textContent = text.thinking;
      },
      body,
    };
    return reply;
  }

  function userBubble(question) {
    log.append(el("div", { class: "msg user" }, [el("span", { class: "sr" }, [text.you + " "]),
      question]));
  }

  async function ask(question) {
    if (starters) starters.remove();
    lastQuestion = question;
    userBubble(question);
    const reply = newReply(question);
    setBusy(true);
    try {
      await run(question, reply, true);
    } finally {
      setBusy(false);
      scrollDown();
    }
  }

  function post(path, body) {
    return fetch(api + path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  }

  async function run(question, reply, mayRenew) {
    const body = { question };
    if (session) body.session_id = session;
    let response;
    try {
      response = await post(streaming ? "/ask/stream" : "/ask", body);
      if (streaming && (response.status === 404 || response.status === 405)) {
        streaming = false; // this server cannot stream: POST /ask from now on
        response = await post("/ask", body);
      }
    } catch (error) {
      return showError(reply, 0, {}, null, question);
    }
    if (!response.ok) {
      const problem = await response.json().catch(() => ({}));
      if (response.status === 401 && problem.reason === "session_invalid" && mayRenew) {
        storeSession(null); // expired or not ours: start a new conversation, once
        return run(question, reply, false);
      }
      return showError(reply, response.status, problem, response.headers.get("retry-after"),
        question);
    }
    const type = response.headers.get("content-type") || "";
    try {
      if (type.startsWith("text/event-stream") && response.body && response.body.getReader) {
        if (!(await readStream(response.body, reply, question))) {
          showError(reply, 0, {}, null, question);
        }
      } else {
        finish(reply, await response.json());
      }
    } catch (error) {
      showError(reply, 0, {}, null, question);
    }
  }

  // Server-sent events from a fetch body: true once a `done` or `error` event arrived.
  async function readStream(stream, reply, question) {
    const reader = stream.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let event = "";
    let payload = [];
    let settled = false;
    const dispatch = () => {
      if (payload.length) settled = handle(event || "message", payload.join("\n"), reply,
        question) || settled;
      event = "";
      payload = [];
    };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let match;
      while ((match = /\r\n|\r|\n/.exec(buffer))) {
        // A CR at the very end may be the first half of a CRLF: wait for more.
        if (match[0] === "\r" && match.index === buffer.length - 1) break;
        const line = buffer.slice(0, match.index);
        buffer = buffer.slice(match.index + match[0].length);
        if (line === "") dispatch();
        else if (line[0] !== ":") {
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const value_ = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "event") event = value_;
          else if (field === "data") payload.push(value_);
        }
      }
    }
    return settled;
  }

  function handle(event, raw, reply, question) {
    let value;
    try {
      value = JSON.parse(raw);
    } catch (error) {
      return false;
    }
    if (event === "step") {
      if (!reply.body.textContent) reply.status(NEXT[value.node] || null);
    } else if (event === "token") {
      reply.status(null);
      // Shown as the final answer will be: a code span closes, and shows as code.
      reply.streamed += String(value.text || "");
      showAnswer(reply.body, reply.streamed);
      scrollDown();
    } else if (event === "done") {
      finish(reply, value);
      return true;
    } else if (event === "error") {
      showError(reply, Number(value.status) || 500, value, value.retry_after, question);
      return true;
    }
    return false;
  }

  // A `code span` in the answer (a command, an option, a setting) shows as code,
  // without its backticks. Text nodes only: nothing the model wrote is parsed as HTML.
  function showAnswer(body, answer) {
    body.textContent = "";
    answer.split(/`([^`\n]+)`/).forEach((part, i) => {
      if (i % 2) body.append(el("code", {}, [part]));
      else if (part) body.append(document.createTextNode(part));
    });
  }

  // A reply in full; `restoring` when it comes from sessionStorage, not the server.
  function finish(reply, result, restoring) {
    if (!restoring) storeSession(result.session_id || session);
    reply.status(null);
    // The final text replaces what streamed: a decline replaces a started answer.
    showAnswer(reply.body, String(result.answer || ""));
    const decision = result.decision;
    reply.bubble.dataset.decision = String(decision);
    if (decision === "warned" || decision === "ended") {
      reply.bubble.classList.add(decision);
      reply.bubble.insertBefore(el("span", { class: "tag" },
        [decision === "warned" ? text.warned : text.ended]), reply.body);
      if (decision === "ended") endConversation();
    }
    const citations = decision === "answered" && Array.isArray(result.citations)
      ? result.citations : [];
    if (citations.length) reply.bubble.append(sources(citations));
    const entry = restoring ? result : {
      k: "b", answer: String(result.answer || ""), decision, trace_id: result.trace_id,
      session_id: result.session_id || session, score: result.score || 0,
      citations: citations.map((c) => ({ title: c.title, source: c.source, url: c.url,
        page: c.page, quote: String(c.quote || c.snippet || "").slice(0, 400) })),
    };
    if (result.trace_id && (decision === "answered" || decision === "declined")) {
      // Only the session that received an answer may rate it: keep that one, not the
      // current one, which a renewal (401) may since have replaced.
      reply.bubble.append(feedback(entry));
    }
    if (decision === "declined") offerPerson(reply.bubble);
    if (!restoring) {
      saved.push({ k: "u", t: reply.question }, entry);
      saveLog();
      announce(t("reply", { text: reply.body.textContent }));
    }
    scrollDown();
  }

  // After a decline: a button that opens the hand-off form, where the site takes them.
  function offerPerson(bubble) {
    if (!config.handoff.enabled || bubble.querySelector(".person-offer")) return;
    const button = el("button", { class: "btn person-offer", type: "button" }, [text.person]);
    button.addEventListener("click", () => openPerson(lastQuestion));
    bubble.append(el("div", { class: "row" }, [button]));
  }

  function openPerson(prefill) {
    if (personForm) {
      personForm.querySelector("input").focus();
      return;
    }
    const handoff = config.handoff;
    const email = el("input", { id: "candor-email", type: "email", required: "",
      autocomplete: "email", maxlength: "254" });
    const message = el("textarea", { id: "candor-message", required: "", maxlength: "2000",
      rows: "3" });
    message.value = prefill || "";
    const note = el("p", { class: "small", role: "status" });
    const send = el("button", { class: "btn", type: "submit" }, [text.sendPerson]);
    const cancel = el("button", { class: "btn", type: "button" }, [text.cancel]);
    const formEl = el("form", { class: "msg bot person", "aria-labelledby": "candor-person" }, [
      el("strong", { id: "candor-person" }, [text.person]),
      el("p", { class: "small" }, [handoff.transcript === "window"
        ? t("handoffWindow", { minutes: handoff.window_minutes }) : text.handoffAll]),
      el("label", { for: "candor-email" }, [text.email]), email,
      el("label", { for: "candor-message" }, [text.message]), message,
      note, el("div", { class: "row" }, [send, cancel]),
    ]);
    personForm = formEl;
    const done = () => {
      formEl.remove();
      personForm = null;
      input.focus();
    };
    cancel.addEventListener("click", done);
    formEl.addEventListener("submit", async (event) => {
      event.preventDefault();
      send.disabled = true;
      const body = { email: email.value.trim(), message: message.value.trim() };
      if (session) body.session_id = session;
      let key = "notSent";
      try {
        const response = await post("/handoff", body);
        const result = await response.json().catch(() => ({}));
        if (response.ok) {
          storeSession(result.session_id || session);
          const sent = t("sent", { email: body.email });
          done();
          log.append(botBubble([sent]));
          saved.push({ k: "n", t: sent });
          saveLog();
          announce(sent);
          scrollDown();
          return;
        }
        if (response.status === 429) key = "personLimited";
        else if (response.status === 422) key = "badEmail";
        else if (result.reason === "session_ended") key = "ended";
      } catch (error) {
        /* the network: notSent */
      }
      send.disabled = false;
      note.textContent = text[key];
    });
    log.append(formEl);
    scrollDown();
    email.focus();
  }

  function sources(citations) {
    const list = el("ol", { class: "sources", "aria-label": text.sources });
    citations.forEach((citation, i) => {
      const title = String(citation.title || citation.source || "");
      // The quote is the passage's words that back the answer, as plain text; a server
      // older than quotes sends only the snippet.
      const quote = el("span", { class: "quote" },
        [String(citation.quote || citation.snippet || "")]);
      let url = safeUrl(citation.url) || safeUrl(citation.source);
      if (url && citation.page && !new URL(url).hash) url += "#page=" + Number(citation.page);
      const number = el("span", { class: "num" }, [`[${i + 1}]`]);
      const chip = url
        ? el("a", { class: "chip", href: url, target: "_blank", rel: "noopener noreferrer" },
          [number, title, el("span", { class: "sr" }, [" " + text.newTab]), quote])
        : el("span", { class: "chip" }, [number, title, quote]);
      list.append(el("li", {}, [chip]));
    });
    return list;
  }

  function feedback(entry) {
    const traceId = entry.trace_id;
    const sessionId = entry.session_id;
    const note = el("span", { class: "small", role: "status" });
    const up = el("button", { class: "btn", type: "button", "aria-pressed": "false",
      "aria-label": text.helpful }, [icon(THUMB)]);
    const down = el("button", { class: "btn", type: "button", "aria-pressed": "false",
      "aria-label": text.notHelpful }, [icon(THUMB, true)]);
    const comment = el("textarea", { maxlength: "1000", "aria-label": text.comment,
      placeholder: text.comment });
    const options = REASONS.map((reason) => el("label", { class: "opt" }, [
      el("input", { type: "radio", name: "reason-" + traceId, value: reason }), " " + text[reason],
    ]));
    const submit = el("button", { class: "btn", type: "submit" }, [text.sendFeedback]);
    const why = el("form", { class: "why", hidden: "" }, [
      el("fieldset", {}, [el("legend", {}, [text.why]), ...options]), comment,
      el("div", { class: "row" }, [submit]),
    ]);
    const bar = el("div", {}, [
      el("div", { class: "row", role: "group", "aria-label": text.feedback },
        [el("span", { class: "small", "aria-hidden": "true" }, [text.feedback]), up, down, note]),
      why,
    ]);
    const pressed = (score) => {
      up.setAttribute("aria-pressed", String(score === 1));
      down.setAttribute("aria-pressed", String(score === -1));
    };
    const rate = async (score, reason, remark) => {
      pressed(score);
      const body = { trace_id: traceId, session_id: sessionId, score };
      if (reason) body.reason = reason;
      if (remark) body.comment = remark;
      try {
        const response = await post("/feedback", body);
        note.textContent = response.ok ? text.thanks : text.feedbackFailed;
        if (response.ok) {
          entry.score = score;
          saveLog();
        }
      } catch (error) {
        note.textContent = text.feedbackFailed;
      }
    };
    up.addEventListener("click", () => {
      why.hidden = true;
      rate(1);
    });
    down.addEventListener("click", () => {
      down.setAttribute("aria-pressed", "true");
      up.setAttribute("aria-pressed", "false");
      note.textContent = "";
      why.hidden = false;
      why.querySelector("input").focus();
    });
    why.addEventListener("submit", (event) => {
      event.preventDefault();
      const chosen = why.querySelector("input:checked");
      why.hidden = true;
      rate(-1, chosen ? chosen.value : null, comment.value.trim());
      down.focus();
    });
    if (entry.score) {
      pressed(entry.score);
      note.textContent = text.thanks;
    }
    return bar;
  }

  // Every failure is a plain message; those worth repeating get a button to retry.
  function showError(reply, status, problem, retryAfter, question) {
    const seconds = Number.parseInt(retryAfter, 10) || DEFAULT_RETRY_SECONDS;
    let key = "failed";
    let retry = true;
    if (status === 0) key = "network";
    else if (status === 403 && problem.reason === "session_ended") {
      key = "ended";
      retry = false;
      endConversation();
    } else if (status === 403 && problem.reason) [key, retry] = ["refused", false];
    // A 403 with no reason of ours is API Gateway's or a firewall's own: the
    // conversation is not over, and another try may pass.
    else if (status === 429) [key, retry] = ["rateLimited", false];
    else if (status === 503 && problem.reason === "budget_exhausted") [key, retry] = ["budget", false];
    else if (status === 503) key = "unavailable";
    else if (status === 413 || status === 422) [key, retry] = ["invalid", false];
    reply.status(null);
    reply.body.textContent = t(key, { seconds });
    reply.bubble.classList.add(key === "ended" ? "ended" : "error");
    if (retry) {
      const again = el("button", { class: "btn", type: "button" }, [text.retry]);
      again.addEventListener("click", async () => {
        if (busy) return;
        reply.reset();
        setBusy(true);
        try {
          await run(question, reply, true);
        } finally {
          setBusy(false);
        }
      });
      reply.bubble.append(el("div", { class: "row" }, [again]));
    }
    announce(reply.body.textContent);
    scrollDown();
  }

  log.append(botBubble([text.greeting]));
  for (const entry of saved) {
    if (entry.k === "u") {
      userBubble(String(entry.t));
      lastQuestion = String(entry.t);
    } else if (entry.k === "n") log.append(botBubble([String(entry.t)]));
    else finish(newReply(lastQuestion), entry, true);
  }
  (document.body || document.documentElement).append(host);
  if (data.open !== undefined) open();
})();
