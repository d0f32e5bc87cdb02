// tools/mongo-test-server/server.mjs: a MongoDB-wire-protocol server for
// reviewd's CONTENT_STORE=mongo tests, run with node.
//
// No MongoDB server is packaged in Debian and nothing but Debian and npm
// is reachable, so the tests use CongoDB, the OP_MSG server (TypeScript,
// in-memory storage, query engine from mingo) that @push.rocks/smartmongo
// 2.2.0 ships in dist_ts/congodb.  install.sh puts it beside its runtime
// dependencies in node_modules/.  reviewd's tests use it through
// libmongoc 1.23 for the hello handshake, ping, replace-with-upsert and
// find; README.md says what that does and does not prove.
//
//   node server.mjs --port N [--host 127.0.0.1]
//
// Prints "listening HOST:PORT" once it accepts connections, and stops on
// SIGTERM or SIGINT.  Data lives in memory only: a stop loses it.
import { CongoServer, plugins }
  from '@push.rocks/smartmongo/dist_ts/congodb/index.js';
import { HelloHandler }
  from '@push.rocks/smartmongo/dist_ts/congodb/server/index.js';

// Drivers monitor a server with "awaitable hello" (topologyVersion and
// maxAwaitTimeMS): a real mongod holds the answer until the topology
// changes or maxAwaitTimeMS passes.  CongoDB answers at once with a new
// topologyVersion each time, so libmongoc's monitor would ask again in a
// tight loop and burn a core.  This keeps one topologyVersion for the
// process and holds awaitable hellos as mongod does.
const topologyVersion = {
  processId: new plugins.bson.ObjectId(),
  counter: plugins.bson.Long.fromNumber(0),
};
const plainHello = HelloHandler.prototype.handle;
HelloHandler.prototype.handle = async function (context) {
  const response = await plainHello.call(this, context);
  const wait = Number(context.command.maxAwaitTimeMS ?? 0);
  response.topologyVersion = topologyVersion;
  if (context.command.topologyVersion !== undefined && wait > 0) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(wait, 10000)));
  }
  return response;
};

function option(name, fallback) {
  const i = process.argv.indexOf(name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1]
                                              : fallback;
}

const host = option('--host', '127.0.0.1');
const port = Number(option('--port', ''));
if (!Number.isInteger(port) || port <= 0 || port > 65535) {
  console.error('mongo-test-server: --port N (1..65535) is required');
  process.exit(2);
}

const server = new CongoServer({ host, port, storage: 'memory' });
try {
  await server.start();
} catch (err) {
  console.error(`mongo-test-server: cannot listen on ${host}:${port}: ` +
                `${err.message}`);
  process.exit(1);
}
console.log(`listening ${host}:${port}`);

let stopping = false;
async function stop(why) {
  if (stopping) {
    return;
  }
  stopping = true;
  await server.stop();
  console.log(`stopped (${why})`);
  process.exit(0);
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
