import SystemCalls
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("retryingInterrupts: a call that EINTR interrupted is made again; every other outcome is returned")
struct RetryingInterruptsTests {
    @Test("a call that fails with EINTR is made again until it ends otherwise")
    func interruptedCallIsRetried() {
        var calls = 0
        let result = retryingInterrupts { () -> Int in
            calls += 1
            guard calls == 3 else {
                errno = EINTR
                return -1
            }
            return 42
        }
        #expect(result == 42)
        #expect(calls == 3)
    }

    @Test("any other failure is returned at once, errno as the call left it")
    func otherFailureIsReturned() {
        var buffer: UInt8 = 0
        var calls = 0
        let result = retryingInterrupts { () -> Int in
            calls += 1
            return read(-1, &buffer, 1)
        }
        let code = errno
        #expect(result == -1)
        #expect(code == EBADF)
        #expect(calls == 1)
    }

    @Test("a result that is not negative is returned, whatever errno holds from before")
    func successIsReturned() {
        var calls = 0
        let result = retryingInterrupts { () -> Int32 in
            calls += 1
            errno = EINTR
            return 0
        }
        #expect(result == 0)
        #expect(calls == 1)
    }
}
