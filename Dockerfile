# One image for the gateway and the workers; the command picks the part.
FROM node:20-bookworm
WORKDIR /app
# The Debian packages the workers' tools drive, from the one list `npm start` installs too (unblob's
# external tools, strace, qemu-user, adb…): a worker in the image reads what an embedded one reads.
COPY scripts/system-packages.sh scripts/system-packages.sh
RUN bash scripts/system-packages.sh image && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
# The dependencies' install scripts (better-sqlite3, ssh2…) but not the project's own `prepare`,
# which builds sources not copied yet: this layer stays cached until the lockfile changes.
RUN npm ci --no-audit --no-fund --ignore-scripts && npm rebuild --no-audit --no-fund
COPY bin bin
COPY src src
COPY scripts scripts
# The Temporal dynamic configuration `dossier cluster up` points its server at.
COPY deploy/temporal deploy/temporal
COPY tsconfig.json tsconfig.build.json ./
# Compile to dist/ (the parts run JavaScript, not tsx), then drop the build-only packages.
RUN node scripts/build.mjs && npm prune --omit=dev --no-audit --no-fund
# The flash unpackers (JFFS2, UBI) from hash-locked wheels; the angr provider installs on first use.
RUN node bin/dossier.js provision-unpackers
ENV DOSSIER_HOME=/var/lib/dossier DOSSIER_HOST=0.0.0.0
CMD ["node", "bin/dossier.js", "gateway"]
