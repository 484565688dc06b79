import Foundation

/// pixie-server's development SMS outbox, `<data_dir>/sms-outbox.jsonl`: with no SMS gateway configured, each code
/// goes there as one JSON line, `{"to": "+14155550123", "text": "Your Pixie code is 123456", ...}`
/// (docs/operations.md). Development and tests only: `pixie --sms-outbox`, the test suites and the sign-in benchmark
/// read the code from it instead of a phone.
public enum DevelopmentOutbox {
    /// The newest six-digit code sent to `number` in the outbox's `contents`, if any.
    public static func latestCode(in contents: Data, to number: String) -> String? {
        let text = String(decoding: contents, as: UTF8.self).split(separator: "\n").compactMap { line -> String? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                object["to"] as? String == number
            else { return nil }
            return object["text"] as? String
        }.last
        return text?.split(separator: " ").map { String($0.filter(\.isNumber)) }.first { $0.count == 6 }
    }

    /// The newest code to `number` in the outbox file at `path`, waiting up to `timeout` for one to be written
    /// (pixie-server writes it before it answers the start request, so it is normally there at once); nil if
    /// none came.
    public static func waitForCode(
        at path: String, to number: String, timeout: Duration = .seconds(10)
    ) async throws
        -> String?
    {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let data = FileManager.default.contents(atPath: path), let code = latestCode(in: data, to: number) {
                return code
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }
}
