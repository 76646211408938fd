// Side-effect imports of stylesheets (vite bundles them).
declare module '*.css';
