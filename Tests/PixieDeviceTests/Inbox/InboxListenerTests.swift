import Foundation
@_spi(Testing) import PixieDevice
import PixieWire
import Testing

/// The listener's table of prompts waiting for their person, in each order its three parties can reach it: the
/// listener attaching a prompt's task, the task taking its decided prompt out, and a settlement from elsewhere.
@Suite("Sign-in: a listener's pending prompts, whatever order their task, the listener and a settlement come in")
struct InboxListenerTests {
    let ladder = SignInRequestHandlerTests()

    /// A prompt that passed the ladder, and the frame that settles it.
    func prompt() throws -> (SignInRequestHandler.Prompt, settlement: Data) {
        var handler = ladder.handler()
        let prompt = try ladder.prompt(handler.handle(try ladder.attempt().box, now: ladder.now))
        return (prompt, try prompt.settlement(.approved))
    }

    /// A task that stands for a prompt's: it runs until cancelled.
    func answering() -> Task<Void, Never> {
        Task { while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) } }
    }

    @Test("a task that decided before the listener attached it keeps sending its answer: attaching cancels nothing")
    func decidedBeforeAttached() throws {
        // Its person answered at once, so the task took its prompt out before `attach` ran. Cancelling it then
        // (as an earlier version did) threw the approval away mid-send, and the new device waited in vain.
        let prompts = PendingPrompts()
        let (prompt, settlement) = try prompt()
        prompts.add(prompt)
        #expect(prompts.remove(prompt))
        let task = answering()
        defer { task.cancel() }
        prompts.attach(task, to: prompt)
        #expect(!task.isCancelled)
        // A settlement arriving now (its own, echoed on the inbox) finds nothing to dismiss.
        #expect(prompts.settle(by: settlement) == nil)
        #expect(!task.isCancelled)
    }

    @Test("a prompt settled before its task was attached has the task cancelled as it is attached, and sends nothing")
    func settledBeforeAttached() throws {
        let prompts = PendingPrompts()
        let (prompt, settlement) = try prompt()
        prompts.add(prompt)
        let settled = try #require(prompts.settle(by: settlement))
        #expect(settled.0.request == prompt.request)
        #expect(settled.1 == .approved)
        let task = answering()
        prompts.attach(task, to: prompt)
        #expect(task.isCancelled)
        #expect(!prompts.remove(prompt))
    }

    @Test("a settled prompt whose task decides before it is attached is not answered")
    func settledThenDecidedThenAttached() throws {
        let prompts = PendingPrompts()
        let (prompt, settlement) = try prompt()
        prompts.add(prompt)
        #expect(prompts.settle(by: settlement) != nil)
        #expect(!prompts.remove(prompt))
        let task = answering()
        defer { task.cancel() }
        prompts.attach(task, to: prompt)
        #expect(prompts.settle(by: settlement) == nil)
    }

    @Test("a prompt settled while its person decides has its task cancelled, and its answer is not sent")
    func settledWhileDeciding() throws {
        let prompts = PendingPrompts()
        let (prompt, settlement) = try prompt()
        let (other, _) = try self.prompt()
        prompts.add(prompt)
        prompts.add(other)
        let task = answering()
        prompts.attach(task, to: prompt)
        #expect(prompts.settle(by: settlement)?.1 == .approved)
        #expect(task.isCancelled)
        #expect(!prompts.remove(prompt))
        // The other prompt is untouched by a settlement that is not its own.
        #expect(prompts.remove(other))
    }
}
