// taskcluster-client ships no type declarations; the tests use it untyped, as its README's JavaScript does.
declare module 'taskcluster-client' {
  const taskcluster: any;
  export default taskcluster;
}
declare module 'taskcluster-client/src/apis.js' {
  const apis: Record<string, { reference: { entries: any[] } }>;
  export default apis;
}
