// The code editor: CodeMirror 6 with the language's highlighting (Lezer
// grammars for Python and JavaScript, legacy stream modes for Perl, Ruby
// and shell) and Mod-Enter (Ctrl or Cmd + Enter) bound to run.
import { basicSetup } from "codemirror";
import { EditorView, keymap } from "@codemirror/view";
import { Compartment, Prec } from "@codemirror/state";
import { StreamLanguage } from "@codemirror/language";
import { python } from "@codemirror/lang-python";
import { javascript } from "@codemirror/lang-javascript";
import { perl } from "@codemirror/legacy-modes/mode/perl";
import { ruby } from "@codemirror/legacy-modes/mode/ruby";
import { shell } from "@codemirror/legacy-modes/mode/shell";

const modes = {
  python: () => python(),
  javascript: () => javascript(),
  perl: () => StreamLanguage.define(perl),
  ruby: () => StreamLanguage.define(ruby),
  shell: () => StreamLanguage.define(shell),
};

// createEditor(parent, {language, doc, onRun}) → {get, set(doc), setLanguage(lang), focus}
export function createEditor(parent, { language, doc, onRun }) {
  const lang = new Compartment();
  const view = new EditorView({
    parent,
    doc,
    extensions: [
      Prec.highest(keymap.of([{ key: "Mod-Enter", run: () => { onRun(); return true; } }])),
      basicSetup,
      lang.of(modes[language]()),
      EditorView.contentAttributes.of({ "data-testid": "editor-input", "aria-label": "Code" }),
    ],
  });
  return {
    get: () => view.state.doc.toString(),
    set(text) { view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } }); },
    setLanguage(name) { view.dispatch({ effects: lang.reconfigure(modes[name]()) }); },
    focus: () => view.focus(),
  };
}
