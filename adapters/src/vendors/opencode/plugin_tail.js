
// One named export only: OpenCode initializes every exported function as a plugin, so a
// second (default) export of the same function would register every hook twice.
export const AepBridge = server;
