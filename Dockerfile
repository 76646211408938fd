FROM node:26-slim
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY bin ./bin
COPY scripts/bundleWorkflows.mjs ./scripts/
RUN npm ci && npm run build && npm prune --omit=dev
ENTRYPOINT ["node", "bin/tgs.js"]
