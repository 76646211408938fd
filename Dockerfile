FROM node:26-slim
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY bin ./bin
COPY scripts/bundleWorkflows.mjs ./scripts/
RUN npm ci && npm run build && npm prune --omit=dev
# the account `tgs shell-worker --task-user tgs-task` runs tasks as (the container itself runs as root)
RUN useradd --system --no-create-home --shell /usr/sbin/nologin tgs-task
ENTRYPOINT ["node", "bin/tgs.js"]
