import { textMessage } from "agentsessions";
import { descriptor, serve, type Sink, type Start } from "agentsessions/harness";

class Notes {
  describe() {
    return descriptor("notes", { version: "1" });
  }

  async run(start: Start, sink: Sink) {
    // Built only from the journal, so a replay asks the same thing.
    const messages = [textMessage("You keep short notes.", "system"), ...start.conversation()];
    const { usage } = await sink.model(messages);          // the host's model, journaled as OUTPUT
    if (usage) await sink.usage(usage);
    await sink.output("noted");
  }
}

const server = await serve(new Notes(), process.argv[2] ?? "127.0.0.1:7073", { stopOnSignals: true });
console.log(`harness listening on ${server.address}`);      // agentsessionsd --harness notes=ADDRESS
