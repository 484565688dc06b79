import Foundation
import PixieWire

/// The new device's wait for a sibling's answer, as a pure state machine (000_e422bd9a7c930342.txt, "Sign in"):
/// it takes events (the start, a timer, a send that ended, a sibling's answer, the relay closing) and returns the
/// actions to take, with no I/O. ``SignInApprovalRequester`` drives it: it sends the DiscoveryBox, runs the timers
/// on the device's clock and reads the reply subject.
///
/// - The check code is shown first, before anything is sent, so a fast acknowledgement never comes before it.
/// - The request goes out at each time of the schedule (``SignInApprovalRequester/Configuration/sendSchedule``),
///   each send after the one before has ended, until a sibling acknowledges it: the relay keeps nothing, so a
///   sibling that comes online later sees only a re-send.
/// - The first send failing ends the wait with its error; a re-send failing (the relay busy, the token budget
///   spent) ends only the re-sends, since the request went out once.
/// - The deadline is a timer of its own, so a send stuck on the relay cannot hold the wait open past it.
/// - Every way out is explicit: approved, rejected, no answer by the deadline, the relay gone, the first send
///   failed.
@_spi(Testing) public struct SignInApprovalStateMachine: Sendable {
    public enum Timer: Sendable, Hashable, CaseIterable {
        /// The next send of the schedule is due.
        case resend
        /// The wait is over.
        case deadline
    }

    public enum Event: Sendable, Equatable {
        case start
        case timerFired(Timer)
        /// The send at this index of the schedule ended, well or not.
        case sendEnded(index: Int, succeeded: Bool)
        /// A frame on the reply subject that opened on this request's channel.
        case answer(SignInAttempt.Answer)
        /// The relay ended the connection.
        case relayClosed
    }

    /// How the wait failed.
    public enum Failure: Sendable, Equatable {
        case rejected
        case noAnswer
        case relayClosed
        /// The first send failed: end with its error.
        case firstSendFailed
    }

    public enum Action: Sendable, Equatable {
        case report(SignInApprovalRequester.Event)
        /// Send the request (the send at this index of the schedule), and say when it has ended.
        case send(index: Int)
        /// Start a timer that fires this long after the start.
        case startTimer(Timer, at: Duration)
        case cancelTimer(Timer)
        case approve(SignInApproval.Approved)
        case fail(Failure)
    }

    public enum Phase: Sendable, Equatable {
        case idle
        /// Waiting for an answer; the send at `nextSend` is the next one due, unless the re-sends are over.
        case waiting(nextSend: Int, sending: Bool, resendsOver: Bool)
        case finished
    }

    public let checkCode: String
    /// When each send is due, from the start (the first at zero).
    public let schedule: [Duration]
    public let maximumWait: Duration
    public private(set) var phase = Phase.idle

    public init(checkCode: String, schedule: [Duration], maximumWait: Duration) {
        self.checkCode = checkCode
        self.schedule = schedule.isEmpty ? [.zero] : schedule
        self.maximumWait = maximumWait
    }

    /// Takes `event`, returns what to do, in order.
    public mutating func handle(_ event: Event) -> [Action] {
        switch (phase, event) {
        case (.finished, _):
            return []

        case (.idle, .start):
            phase = .waiting(nextSend: 1, sending: true, resendsOver: schedule.count == 1)
            return [.report(.waiting(checkCode: checkCode)), .send(index: 0), .startTimer(.deadline, at: maximumWait)]
        case (.idle, _), (.waiting, .start):
            return []

        case (.waiting(let next, let sending, let over), .sendEnded(let index, let succeeded)):
            // Only the send in flight ends (sends go one at a time).
            guard sending, index == next - 1 else { return [] }
            if !succeeded, index == 0 { return finish(.fail(.firstSendFailed)) }
            let resendsOver = over || !succeeded || next >= schedule.count
            phase = .waiting(nextSend: next, sending: false, resendsOver: resendsOver)
            return resendsOver ? [] : [.startTimer(.resend, at: schedule[next])]

        case (.waiting(let next, let sending, let over), .timerFired(.resend)):
            guard !over, !sending, next < schedule.count else { return [] }
            phase = .waiting(nextSend: next + 1, sending: true, resendsOver: over)
            return [.send(index: next)]

        case (.waiting, .timerFired(.deadline)):
            return finish(.fail(.noAnswer))

        case (.waiting(let next, let sending, _), .answer(.acknowledged(let family))):
            // A sibling has it: no more re-sends. Each acknowledgement is shown (two siblings may both prompt).
            phase = .waiting(nextSend: next, sending: sending, resendsOver: true)
            return [.cancelTimer(.resend), .report(.acknowledged(deviceFamily: family))]
        case (.waiting, .answer(.approved(let approved))):
            return finish(.approve(approved))
        case (.waiting, .answer(.rejected)):
            return finish(.fail(.rejected))

        case (.waiting, .relayClosed):
            return finish(.fail(.relayClosed))
        }
    }

    private mutating func finish(_ last: Action) -> [Action] {
        phase = .finished
        return [.cancelTimer(.resend), .cancelTimer(.deadline), last]
    }
}
