// Builds the single-page app into dist/, which the `trellis` binary embeds. File names carry
// content hashes and no source maps or timestamps are emitted, so a rebuild from the locked
// dependencies reproduces dist/ byte for byte (CI checks that).
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

const apiTarget = process.env.TRELLIS_UI_API ?? "http://127.0.0.1:4173";

export default defineConfig({
  plugins: [react()],
  base: "/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    sourcemap: false,
    reportCompressedSize: false,
    chunkSizeWarningLimit: 4096,
    // The app, and the run view alone for frames in other pages (embed.html).
    rollupOptions: { input: { index: "index.html", embed: "embed.html" } },
  },
  server: {
    proxy: { "/api": { target: apiTarget, changeOrigin: false } },
  },
});
