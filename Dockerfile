# payrecon: one image, one process per service (the compose file picks the sub-command).
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY bin ./bin
COPY src ./src
COPY schemas ./schemas
COPY tsconfig.json ./
USER node
EXPOSE 8080
ENTRYPOINT ["node", "bin/payrecon.mjs"]
CMD ["up"]
