// The context selector of the Run panel: the chosen sandbox's contexts of
// the picked language (GET /languages/<lang>/sandboxes/<id>/contexts), ""
// for the language's default one, and "New context" (POST …/contexts).
// The choice is app.state.contextId.
function base(app, id) {
  return `/languages/${app.state.language}/sandboxes/${encodeURIComponent(id)}/contexts`;
}

export function mountContexts({ select, button, status }, app) {
  let sandboxId = "";

  function fill(list) {
    select.textContent = "";
    select.append(new Option("default", ""));
    for (const c of list) {
      const o = new Option(`${c.id.slice(0, 8)} · ${c.cwd}`, c.id);
      o.title = c.id;
      select.append(o);
    }
    if (!list.some((c) => c.id === app.state.contextId)) app.state.contextId = "";
    select.value = app.state.contextId;
  }

  async function load(id) {
    sandboxId = id;
    if (!id) return fill([]);
    const reply = await app.withKey(() => app.api.json("GET", base(app, id)));
    if (id !== sandboxId) return; // a later load won
    if (!reply.ok) {
      status.textContent = "Contexts: " + app.api.message(reply.body, reply.status);
      return fill([]);
    }
    fill(reply.body.contexts.filter((c) => c.language === app.state.language));
  }

  select.addEventListener("change", () => { app.state.contextId = select.value; });
  button.addEventListener("click", async () => {
    if (!sandboxId) return;
    const reply = await app.withKey(() => app.api.json("POST", base(app, sandboxId), {}));
    if (!reply.ok) {
      status.textContent = "New context: " + app.api.message(reply.body, reply.status);
      return;
    }
    app.state.contextId = reply.body.id;
    status.textContent = "Context " + reply.body.id + " created";
    await load(sandboxId);
  });
  return { load };
}
