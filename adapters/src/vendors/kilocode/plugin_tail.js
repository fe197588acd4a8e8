
// The fork's plugin module shape (Kilo 7.7's loader): a default export `{ id, server }` and
// nothing else. A file plugin without `id` is refused ("must export id"), and one default
// export keeps the loader from initializing the same hooks twice.
export default { id: "aep-bridge", server };
